"""The ``spade`` command: train, resume, inspect, recipes.

    spade train --recipe quickstart [key=value ...] [--run-dir DIR] [--dry-run]
    spade resume RUN_DIR
    spade inspect RUN_DIR
    spade recipes

User mistakes (unknown recipe, bad override, missing run directory) print one ``error:`` line
and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from spade_train.errors import UserError


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
            (
                "designer reward",
                f"{cfg.reward.designer} (invalid "
                f"{cfg.reward.invalid_penalty if cfg.reward.train_invalid else 'masked'}, "
                f"delay {cfg.reward.delay_cycles} cycles)",
            ),
            (
                "grounding / memory",
                f"{d.grounding.enabled and d.grounding.mode} / {d.memory.enabled}",
            ),
        ]
        if cfg.cold_start.enabled:
            c = cfg.cold_start
            what = (
                f"designer warm-up on the starter training games, {c.epochs} epochs, "
                f"lr {c.lr}, seed {c.seed} (cached after the first run)"
                if cfg.cold_start_applies
                else "skipped: no scaffolded designer to teach"
            )
            rows.append(("cold start", what))
    elif cfg.mode == "fixed-static":
        corpus = cfg.fixed.corpus
        if corpus != "example" and ("${" in corpus or not Path(corpus).exists()):
            from spade_train.loop import corpus_missing

            corpus = f"MISSING: {corpus_missing(corpus)}"
        rows.append(("static corpus", f"{corpus} (split {cfg.fixed.split})"))
    elif cfg.mode == "fixed-rlve":
        rows += _rlve_plan(cfg)
    else:
        rows.append(("procedural generators", ", ".join(cfg.fixed.generators)))
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
    loop = start_run(cfg, run_dir, log=lambda m: console.print(f"[bold]spade[/]: {m}"))
    loop.train()
    console.print(f"[bold]spade[/]: done; run directory {run_dir} (plots in {run_dir}/plots)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from spade_train.loop import resume_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "config.yaml").exists():
        raise UserError(f"{run_dir} is not a spade run directory (no config.yaml)")
    console = _console()
    loop = resume_run(run_dir, log=lambda m: console.print(f"[bold]spade[/]: {m}"))
    console.print(f"[bold]spade[/]: resuming {run_dir} after cycle {loop.cycle}")
    loop.train()
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from spade_train.plots import write_plots
    from spade_train.rundir import RunDir

    run = RunDir(args.run_dir)
    if not run.metrics.exists():
        raise UserError(f"{run.root} has no metrics.jsonl; is it a spade run directory?")
    rows = run.read_metrics()
    columns = [
        ("cycle", "cycle"),
        ("valid", "design/validity_rate"),
        ("new", "design/new"),
        ("R hint", "play/return_hint"),
        ("R no hint", "play/return_nohint"),
        ("held-out R", "heldout/return_nohint"),
        ("regret", "reward/regret_mean"),
        ("adv std a/d", "adv/std"),
        ("loss", "train/loss"),
        ("pool", "pool/size"),
        ("s", "time/cycle_s"),
    ]
    table = Table(title=f"{run.root}")
    for title, _ in columns:
        table.add_column(title, justify="right")
    for row in rows:
        cells = []
        for _, key in columns:
            v = row.get(key)
            if key == "adv/std":  # both roles' advantage spread in one cell
                a, d = row.get("adv/agent_std"), row.get("adv/designer_std")
                v = "-" if a is None and d is None else f"{a or 0:.2f}/{d or 0:.2f}"
            cells.append("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v))
        table.add_row(*cells)
    console = Console()
    console.print(table)
    console.print(_why_table(rows))
    paths = write_plots(rows, run.plots)
    latest = run.latest_checkpoint()
    console.print(f"checkpoint: {latest.name if latest else 'none'}")
    console.print("plots: " + ", ".join(str(p) for p in paths))
    return 0


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
    from spade_train.config import list_recipes

    for name in list_recipes():
        print(name)
    return 0


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
    inspect = sub.add_parser("inspect", help="summary table and plots of a run")
    inspect.add_argument("run_dir")
    inspect.set_defaults(func=cmd_inspect)
    recipes = sub.add_parser("recipes", help="list the shipped recipes")
    recipes.set_defaults(func=cmd_recipes)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from spade_train.config import RecipeError
    from spade_train.rundir import RunDirError

    try:
        return args.func(args)
    except (UserError, RecipeError, RunDirError, FileExistsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted; `spade resume RUN_DIR` continues from the last checkpoint",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
