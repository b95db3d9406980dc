"""The ``spade`` command: train, resume, inspect, recipes.

    spade train --recipe quickstart [key=value ...] [--run-dir DIR] [--dry-run]
    spade resume RUN_DIR
    spade inspect RUN_DIR [RUN_DIR ...] [--plots DIR]
    spade recipes

User mistakes (unknown recipe, bad override, missing run directory) print one ``error:`` line
and exit with status 2; no traceback. Ctrl-C prints one line saying what was kept and exits
with status 130. Heavy libraries (torch, transformers, matplotlib, rich) are imported only by
the command that needs them, so ``spade --help`` and ``spade recipes`` answer at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from spade_train.errors import RecipeError, RunDirError, UserError


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _plan(cfg: Any) -> list[tuple[str, str]]:
    from spade_train.steps.play import episodes_per_env, hint_plays

    b, d, a = cfg.backend, cfg.designer, cfg.agent
    rows = [
        ("recipe", cfg.name),
        ("mode / setting", f"{cfg.mode} / {cfg.setting}"),
        ("cycles", str(cfg.cycles)),
        ("backend", f"{b.name}: {b.model} (device {b.device}, lr {b.lr}, lora {bool(b.lora)})"),
    ]
    rows += _backend_rows(b.plan())
    if cfg.mode == "spade":
        rows += [
            (
                "designer",
                f"{d.prompts_per_cycle} prompts x {d.group_size} completions every "
                f"{d.regenerate_every} cycle(s), skills {', '.join(d.skills)}, "
                f"hint from {d.hint_source}",
            ),
            ("designer reward", designer_reward_summary(cfg.reward)),
            (
                "grounding / memory",
                f"{d.grounding.enabled and d.grounding.mode} / {d.memory.enabled}",
            ),
        ]
    elif cfg.mode == "fixed-static":
        from spade_train.sources import corpus_path

        try:
            corpus = str(corpus_path(cfg))
        except FileNotFoundError as exc:
            corpus = f"MISSING: {exc}"
        rows.append(("static corpus", f"{corpus} (split {cfg.fixed.split})"))
    elif cfg.mode == "fixed-rlve":
        rows += _rlve_plan(cfg)
    else:
        rows.append(("procedural generators", ", ".join(cfg.fixed.generators)))
    if cfg.cold_start.enabled:
        c = cfg.cold_start
        what = (
            f"designer warm-up on the starter training games, {c.epochs} epochs, "
            f"lr {c.lr}, seed {c.seed} (cached after the first run)"
            if cfg.cold_start_applies
            else "skipped: no scaffolded designer to teach"
            if not cfg.designer.scaffold
            else f"skipped in mode {cfg.mode} (cold_start.every_mode=false)"
        )
        rows.append(("cold start", what))
    hints = "with and without hint" if hint_plays(cfg) else "without hint"
    rows += [
        (
            "agent",
            f"{a.envs_per_cycle} envs x {episodes_per_env(cfg, a.envs_per_cycle)} episodes "
            f"{hints}, "
            f"max {a.max_turns} turns",
        ),
        ("validation", f"{cfg.validation.sandbox} sandbox, {cfg.validation.workers} workers"),
        ("role normalization", str(cfg.advantage.role_normalization)),
    ]
    return rows


def designer_reward_summary(r: Any) -> str:
    """The designer reward's variant and every penalty that applies, as the run will pay them:
    an invalid design whose code never parsed, one whose program failed (when scored apart),
    the per-reason penalties, a valid copy of a shipped game, a generation timeout."""
    if not r.train_invalid:  # upstream: a failed design slot leaves no designer sample
        return (
            f"{r.designer} (invalid designs masked, never trained; delay {r.delay_cycles} cycles)"
        )
    parts = [f"invalid {r.invalid_penalty:+.1f}"]
    if r.parsed_invalid_penalty is not None:
        parts[0] = f"unparsed {r.invalid_penalty:+.1f}"
        parts.append(f"parsed but invalid {r.parsed_invalid_penalty:+.1f}")
    by_value: dict[float, list[str]] = {}
    for reason, value in (r.reason_penalties or {}).items():
        by_value.setdefault(float(value), []).append(str(reason))
    for value, reasons in sorted(by_value.items()):
        parts.append(f"{', '.join(sorted(reasons))} {value:+.1f}")
    if r.copy_reward is not None:
        parts.append(f"valid copy {r.copy_reward:+.1f}")
    parts.append(f"timeout {r.timeout_penalty:+.1f}")
    return f"{r.designer} ({'; '.join(parts)}; delay {r.delay_cycles} cycles)"


def _backend_rows(plan: dict[str, Any], prefix: str = "backend") -> list[tuple[str, str]]:
    """The backend's build plan (stopping at the device) as table rows, nested keys joined."""
    rows = []
    for key, value in plan.items():
        if key == "backend":
            continue
        if isinstance(value, dict):
            rows += _backend_rows(value, f"{prefix} {key}")
        elif key != "ignored" or value:
            rows.append((f"{prefix} {key}", str(value)))
    return rows


def _rlve_plan(cfg: Any) -> list[tuple[str, str]]:
    """The RLVE rows of the plan; the environment set is resolved (rlve-gym must be there)."""
    import spade_envs as se

    r = cfg.rlve
    try:
        names = se.resolve_rlve_env_set(r.envs)
    except se.SpadeEnvsError as exc:
        raise UserError(f"rlve.envs: {exc}") from None
    label = r.envs if isinstance(r.envs, str) else "list"
    return [
        ("RLVE environments", f"{label}: {len(names)} ({', '.join(names[:4])}, ...)"),
        (
            "RLVE difficulty",
            f"sliding window tau_acc {r.tau_acc}, tau_num {r.tau_num}, d_delta {r.d_delta}, "
            f"max {r.max_difficulty}; same problem per group {r.same_problem}; "
            f"{r.attempts} attempt(s), reward {r.reward}",
        ),
    ]


def _print_plan(cfg: Any, run_dir: Path | None) -> None:
    from rich.table import Table

    table = Table(title=f"spade train plan: {cfg.name}", show_header=False)
    for key, value in _plan(cfg):
        table.add_row(key, value)
    if run_dir is not None:
        table.add_row("run directory", str(run_dir))
    from rich.console import Console

    Console().print(table)


def _default_run_dir(cfg: Any) -> Path:
    if cfg.run_dir:
        return Path(cfg.run_dir)
    return Path("runs") / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def cmd_train(args: argparse.Namespace) -> int:
    from spade_train.config import load_recipe

    cfg = load_recipe(args.recipe, args.overrides)
    try:  # a key the backend would silently ignore is a mistake, dry run or not
        cfg.backend.check_honoured()
    except ValueError as exc:
        raise UserError(f"recipe {cfg.name}: {exc}") from None
    run_dir = Path(args.run_dir) if args.run_dir else _default_run_dir(cfg)
    _print_plan(cfg, run_dir)
    if args.dry_run:
        print(f"dry run: recipe {cfg.name} is valid; nothing was started")
        return 0
    from spade_train.loop import start_run

    console = _console()
    with _SigintLatch() as latch:
        try:
            loop = start_run(cfg, run_dir, log=lambda m: console.print(f"[bold]spade[/]: {m}"))
            loop.stop_requested = latch.is_set
            loop.train()
        except BaseException as exc:
            if not _caused_by_ctrl_c(exc):
                raise
            return _interrupted(run_dir)
    if latch.is_set():  # Ctrl-C during the last cycle: what finished is kept all the same
        return _interrupted(run_dir)
    console.print(f"[bold]spade[/]: done; run directory {run_dir} (plots in {run_dir}/plots)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from spade_train.loop import resume_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "config.yaml").exists():
        raise UserError(f"{run_dir} is not a spade run directory (no config.yaml)")
    console = _console()
    with _SigintLatch() as latch:
        try:
            loop = resume_run(run_dir, log=lambda m: console.print(f"[bold]spade[/]: {m}"))
            loop.stop_requested = latch.is_set
            console.print(f"[bold]spade[/]: resuming {run_dir} after cycle {loop.cycle}")
            loop.train()
        except BaseException as exc:
            if not _caused_by_ctrl_c(exc):
                raise
            return _interrupted(run_dir)
    return _interrupted(run_dir) if latch.is_set() else 0


class _SigintLatch:
    """Ctrl-C remembered as well as raised. Python swallows a KeyboardInterrupt that lands in a
    garbage-collection callback or ``__del__`` ("Exception ignored in ..."); the latch lets the
    loop stop at the next cycle boundary all the same, instead of training on to the end."""

    def __init__(self) -> None:
        self._hit = False
        self._previous: Any = None

    def is_set(self) -> bool:
        return self._hit

    def _handle(self, signum: int, frame: Any) -> None:
        self._hit = True
        raise KeyboardInterrupt

    def __enter__(self) -> _SigintLatch:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _caused_by_ctrl_c(exc: BaseException) -> bool:
    """True for Ctrl-C and for an error raised while unwinding from one: Ctrl-C reaches the
    whole process group, so a sandbox worker may die of it first and its pipe's error replace
    the KeyboardInterrupt in a cleanup handler."""
    seen: BaseException | None = exc
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return False


def _interrupted(run_dir: Path) -> int:
    """Ctrl-C: one line saying what the run directory keeps, then exit status 130."""
    from spade_train.rundir import RunDir

    run = RunDir(run_dir)
    try:
        cycles = len(run.read_metrics())
        latest = run.latest_checkpoint()
    except Exception:  # whatever the interrupted write left: the message still goes out
        cycles, latest = 0, None
    if latest is None:
        kept = f"no cycle finished; start again with `spade train` (run directory {run_dir})"
    else:
        kept = (
            f"kept {cycles} finished cycle(s) in {run_dir} (metrics, designs, transcripts, "
            f"plots; checkpoint {latest.name}); continue with `spade resume {run_dir}`"
        )
    print(f"interrupted: {kept}", file=sys.stderr)
    return 130


def cmd_inspect(args: argparse.Namespace) -> int:
    from spade_train.rundir import RunDir

    runs = [RunDir(d) for d in args.run_dirs]
    if len(runs) > 1 and not args.plots:
        raise UserError("several runs are drawn together: name the plots' directory with --plots")
    tables = []
    for run in runs:
        if not run.root.is_dir():
            raise UserError(f"{run.root} does not exist; give the directory `spade train` printed")
        if not run.metrics.exists() and not run.config.exists():
            raise UserError(
                f"{run.root} has no metrics.jsonl or config.yaml; is it a run directory?"
            )
        tables.append(run.read_metrics())
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if not any(tables):
        print(f"{', '.join(args.run_dirs)}: no cycles yet (a cycle's metrics are written when it "
              "finishes); nothing to show")  # fmt: skip
        return 0
    from rich.console import Console

    from spade_train.plots import write_run_plots

    # off a terminal (a log, a pipe) rich would wrap at 80 columns and cut every cell
    console = Console() if sys.stdout.isatty() else Console(width=160)
    for run, rows in zip(runs, tables, strict=True):
        if not rows:
            console.print(f"{run.root}: no cycles yet")
            continue
        console.print(_summary_table(run.root, rows))
        console.print(_why_table(rows))
        latest = run.latest_checkpoint()
        console.print(f"checkpoint: {latest.name if latest else 'none'}")
    paths = write_run_plots([rows for rows in tables if rows], args.plots or runs[0].plots)
    console.print("plots: " + ", ".join(str(p) for p in paths))
    return 0


def _summary_table(root: Path, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    columns = [
        ("cycle", "cycle"),
        ("valid", "design/validity_rate"),
        ("new", "design/new"),
        ("R hint", "play/return_hint"),
        ("R no hint", "play/return_nohint"),
        ("held-out R", "heldout/return_nohint"),
        ("solved h/nh", "play/solved"),
        ("held-out n", "heldout/episodes"),
        ("regret", "reward/regret_mean"),
        ("regret p10/50/90", "reward/regret_p"),
        ("reward std a/d", "adv/std"),
        ("loss", "train/loss"),
        ("pool", "pool/size"),
        ("s", "time/cycle_s"),
    ]
    table = Table(title=f"{root}")
    for title, _ in columns:
        table.add_column(title, justify="right")
    for row in rows:
        cells = []
        for _, key in columns:
            v = row.get(key)
            if key == "adv/std":  # both roles' raw reward spread (before normalization)
                a, d = row.get("adv/agent_reward_std"), row.get("adv/designer_reward_std")
                v = "-" if a is None and d is None else f"{a or 0:.2f}/{d or 0:.2f}"
            elif key in ("play/solved", "reward/regret_p"):  # two or three keys in one cell
                parts = ("_hint", "_nohint") if key == "play/solved" else ("10", "50", "90")
                got = [row.get(key + p) for p in parts]
                v = "-" if all(g is None for g in got) else "/".join(f"{g or 0:.2f}" for g in got)
            cells.append("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v))
        table.add_row(*cells)
    return table


def _why_table(rows: list[dict[str, Any]]) -> Any:
    """Per cycle: why designs failed, why episodes ended, how often a reply gave an action."""
    from rich.table import Table

    table = Table(title="why designs failed and episodes ended")
    for title in ("cycle", "designs: reasons", "episodes: ended", "parsed"):
        table.add_column(
            title, justify="left" if "reasons" in title or "ended" in title else "right"
        )

    def counts(value: Any) -> str:
        if not value:
            return "-"
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items(), key=lambda kv: -kv[1]))

    for row in rows:
        rate = row.get("play/parsed_rate")
        table.add_row(
            str(row["cycle"]),
            counts(row.get("design/reasons")),
            counts(row.get("play/ended")),
            "-" if rate is None else f"{rate:.0%}",
        )
    return table


def cmd_recipes(_args: argparse.Namespace) -> int:
    from spade_train.recipe_notes import recipe_notes

    notes = recipe_notes()
    width = max(len(n.name) for n in notes)
    for note in notes:
        print(f"{note.name:<{width}}  {note.purpose}")
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from spade_train import experiment as ex

    root = Path(args.root) / args.size
    try:
        runs = ex.plan(args.size, args.seeds, root, args.arms.split(",") if args.arms else None)
        shared = ex.check_budgets(runs)
        n_heldout = ex.heldout_disjoint()
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(f"experiment {args.name}, size {args.size}: {len(runs)} runs in {root}")
    print(f"budget (every training arm): {shared}")
    print(
        f"held-out: {n_heldout} {ex.HELDOUT_CORPUS} games, disjoint from the training games "
        f"of {', '.join(ex.TRAIN_CORPORA)}"
    )
    for run in runs:
        print(f"  {run.arm:<13} seed {run.seed}: {ex.state(run)}")
    if args.dry_run:
        return 0
    try:
        rc = ex.execute(runs, root)
    except KeyboardInterrupt:
        rc = 130
    if rc == 130:
        print(f"interrupted: finished runs are kept in {root}; run again to go on", file=sys.stderr)
    elif rc == 0:
        print(f"results: {root}/results.md, {root}/rq1.png")
    return rc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spade", description="SPADE self-play training")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="start a run from a recipe")
    train.add_argument("--recipe", required=True, help="recipe name (see `spade recipes`) or path")
    train.add_argument("--run-dir", help="run directory (default runs/<recipe>-<time>)")
    train.add_argument("--dry-run", action="store_true", help="validate and print the plan only")
    train.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides")
    train.set_defaults(func=cmd_train)
    resume = sub.add_parser("resume", help="continue a run from its last checkpoint")
    resume.add_argument("run_dir")
    resume.set_defaults(func=cmd_resume)
    inspect = sub.add_parser(
        "inspect", help="summary tables and plots of a run (or of several seeds, drawn together)"
    )
    inspect.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    inspect.add_argument(
        "--plots", help="where to write the plots (default RUN_DIR/plots; needed for several runs)"
    )
    inspect.set_defaults(func=cmd_inspect)
    recipes = sub.add_parser("recipes", help="list the shipped recipes, one line each")
    recipes.set_defaults(func=cmd_recipes)
    exp = sub.add_parser("experiment", help="run a comparison of training arms over seeds")
    exp.add_argument("name", choices=["rq1-mini"])
    exp.add_argument("--size", default="tiny", help="tiny (1 cycle a run) or mini (4 cycles)")
    exp.add_argument("--seeds", type=int, default=3)
    exp.add_argument("--arms", help="comma-separated subset of the arms (default all five)")
    exp.add_argument("--root", default="runs/rq1-mini", help="experiment directory")
    exp.add_argument("--dry-run", action="store_true", help="print the plan and budgets only")
    exp.set_defaults(func=cmd_experiment)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UserError, RecipeError, RunDirError, FileExistsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
