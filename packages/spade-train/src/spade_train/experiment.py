"""`spade experiment rq1-mini`: the paper's first research question in miniature on CPU.

Four training arms train the embedded quickstart policy for the same budget (cycles x
environments x episodes x turns x tokens): SPADE self-play; fixed-environment GRPO on a static
corpus (the example corpus's training split, the stand-in for the released static corpus);
fixed-environment GRPO on the starter corpus's training games (SPADE's seed pool without its
designs: what the designer adds); fixed-environment RLVE. A fifth arm, no training, runs as
many cycles at the learning rate's smallest allowed value (the update changes no float32
weight) on one environment a cycle, so it costs little and scores the starting weights on the
same held-out episodes. Every arm starts from the same weights (the quickstart's cached
designer cold start, applied in every mode) and is played on the starter corpus's held-out
games after its last cycle's update, without hints, with the same episodes and episode seeds in
every arm (``COMPARABLE``); each arm runs over several seeds.
Each arm x seed is one run directory under the experiment root: a finished one is never re-run,
a partial one resumes from its last checkpoint (or starts again when it has none)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELDOUT_CORPUS = "starter"
STATIC_CORPUS = "example"
METRIC = "heldout/return_nohint"
NO_TRAIN_LR = 1.0e-30
# Every arm starts from the same weights and is scored the same way: the quickstart's designer
# cold start in every mode (one cached warm-up; without it the 135M designer closed no code
# block in 20 designs, so SPADE's pool was the starter games alone), and the held-out games
# played without hints only: the same games, episodes, and episode seeds.
COMPARABLE = ["cold_start.enabled=true", "cold_start.every_mode=true", "eval.heldout_hints=false"]
# mini: 4 cycles, so that 5 arms x 3 seeds finish in about two hours on an idle 2-core machine
SIZES: dict[str, int] = {"tiny": 1, "mini": 4}
UNTRAINED = "no-training"
TRAIN_CORPORA = (STATIC_CORPUS, "starter")
ARMS: dict[str, list[str]] = {
    "spade": ["mode=spade"],
    "fixed-static": ["mode=fixed-static", f"fixed.corpus={STATIC_CORPUS}", "fixed.split=train"],
    "fixed-starter": ["mode=fixed-static", f"fixed.corpus={TRAIN_CORPORA[1]}", "fixed.split=train"],
    "fixed-rlve": ["mode=fixed-rlve"],
    UNTRAINED: [
        "mode=fixed-static",
        f"fixed.corpus={STATIC_CORPUS}",
        "fixed.split=train",
        f"backend.lr={NO_TRAIN_LR}",
        # its updates change nothing, so one game a cycle is enough; it still plays every cycle
        # because the held-out episode and sampling seeds derive from the seed and the cycle:
        # after the same number of cycles it plays the other arms' held-out episodes exactly
        "agent.envs_per_cycle=1",
    ],
}
ARM_LABELS = {
    "spade": "SPADE self-play",
    "fixed-static": f"fixed-env GRPO (static `{STATIC_CORPUS}` corpus)",
    "fixed-starter": "fixed-env GRPO (`starter` training games)",
    "fixed-rlve": "fixed-env RLVE",
    UNTRAINED: "no training",
}


@dataclass(frozen=True)
class Run:
    arm: str
    seed: int
    cycles: int
    root: Path

    @property
    def run_dir(self) -> Path:
        return self.root / f"{self.arm}-seed{self.seed}"

    def overrides(self) -> list[str]:
        c = self.cycles
        common = [f"seed={self.seed}", f"cycles={c}", f"eval.heldout={HELDOUT_CORPUS}"]
        return [
            *common,
            *COMPARABLE,
            f"eval.heldout_every={c}",
            "checkpoint.keep=1",
            *ARMS[self.arm],
        ]


def plan(size: str, seeds: int, root: Path, arms: list[str] | None = None) -> list[Run]:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; use one of {', '.join(SIZES)}")
    if seeds < 1:
        raise ValueError("--seeds must be at least 1")
    chosen = arms or list(ARMS)
    unknown = [a for a in chosen if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown arm(s) {', '.join(unknown)}; use {', '.join(ARMS)}")
    return [Run(a, s, SIZES[size], root) for s in range(seeds) for a in chosen]


def budget(run: Run) -> dict[str, Any]:
    """The agent's training budget of one run, from its loaded recipe."""
    from spade_train.config import load_recipe

    cfg = load_recipe("quickstart", run.overrides())
    a = cfg.agent
    return {
        "cycles": cfg.cycles,
        "envs_per_cycle": a.envs_per_cycle,
        "episodes_per_env": a.episodes_per_env,
        "hint_plays_per_env": a.hint_plays_per_env,
        "max_turns": a.max_turns,
        "max_new_tokens": a.sampling.max_new_tokens,
    }


def check_budgets(runs: list[Run]) -> dict[str, Any]:
    """The one budget every training arm shares; a ValueError naming the arm whose budget
    differs (the untrained arm has none)."""
    first: dict[str, Any] | None = None
    for run in runs:
        if run.arm == UNTRAINED:
            continue
        b = budget(run)
        if first is None:
            first = b
        elif b != first:
            raise ValueError(f"arm {run.arm} budget {b} differs from {first}")
    return first or {}


def heldout_disjoint() -> int:
    """Assert no training game of a fixed arm (the static and the starter corpus's ``train``
    splits) is a held-out game, by id and by source; returns the number of held-out games."""
    import spade_envs as se

    held = se.load_corpus(se.resolve_corpus_path(HELDOUT_CORPUS))
    heldout = [r for r in held.records if r.split == "heldout"]
    for name in TRAIN_CORPORA:
        static = se.load_corpus(se.resolve_corpus_path(name))
        train = [r for r in static.records if r.split == "train"]
        ids = {r.id for r in train} & {r.id for r in heldout}
        srcs = {static.source(r.id) for r in train} & {held.source(r.id) for r in heldout}
        if ids or srcs:
            raise ValueError(f"held-out games overlap {name}'s training games: {sorted(ids)}")
    return len(heldout)


def state(run: Run) -> str:
    """``finished`` (its last cycle has a held-out row), ``partial`` or ``new``."""
    rows = read_rows(run.run_dir)
    if any(r.get("cycle") == run.cycles and METRIC in r for r in rows):
        return "finished"
    return "partial" if (run.run_dir / "config.yaml").exists() else "new"


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the Student-t confidence interval over seeds (nan bounds for one seed)."""
    mean = statistics.fmean(values)
    n = len(values)
    if n < 2:
        return mean, math.nan, math.nan
    half = _t_quantile(0.5 + level / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean, mean - half, mean + half


def _t_quantile(p: float, df: int) -> float:
    """Student-t quantile by bisection on its CDF (regularized incomplete beta, series)."""
    lo, hi = 0.0, 1.0e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t_cdf(t: float, df: int) -> float:
    x = df / (df + t * t)
    return 1.0 - 0.5 * _betainc(df / 2, 0.5, x)


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    front = math.exp(ln + b * math.log(1.0 - x)) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + num / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1.0 - c * d) < 1e-14:
            break
    return front * (f - 1.0)


def collect(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """Per arm: each finished seed's last held-out return, episode count and wall time."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        arm = out.setdefault(
            run.arm, {"values": [], "seeds": [], "episodes": 0, "seconds": 0.0, "curve": {}}
        )
        rows = read_rows(run.run_dir)
        last = [r for r in rows if r.get("cycle") == run.cycles and METRIC in r]
        if not last:
            continue
        arm["values"].append(float(last[-1][METRIC]))
        arm["seeds"].append(run.seed)
        arm["episodes"] += int(last[-1].get("heldout/episodes", 0))
        arm["seconds"] += sum(float(r.get("time/cycle_s", 0.0)) for r in rows)
        for r in rows:
            if "play/return_nohint" in r:
                arm["curve"].setdefault(int(r["cycle"]), []).append(float(r["play/return_nohint"]))
    return out


def table(results: dict[str, dict[str, Any]]) -> str:
    """The RQ1 layout: one row per method, held-out return as mean [95 % t-interval]."""
    lines = [
        "| method | seeds | held-out return (no hint), mean [95 % CI] | held-out episodes |",
        "|---|---:|---|---:|",
    ]
    for arm, r in results.items():
        if not r["values"]:
            lines.append(f"| {ARM_LABELS[arm]} | 0 | not run | 0 |")
            continue
        mean, lo, hi = t_interval(r["values"])
        ci = f"[{lo:.3f}, {hi:.3f}]" if not math.isnan(lo) else "(one seed)"
        n = len(r["values"])
        lines.append(f"| {ARM_LABELS[arm]} | {n} | {mean:.3f} {ci} | {r['episodes']} |")
    return "\n".join(lines) + "\n" + paired_table(results)


def paired(results: dict[str, dict[str, Any]], arm: str, base: str = "spade") -> list[float]:
    """``base`` minus ``arm`` on each seed both finished (the arms share seeds and held-out
    episodes, so the difference removes what the seed does to both)."""
    a = dict(zip(results[arm]["seeds"], results[arm]["values"], strict=True))
    b = dict(zip(results[base]["seeds"], results[base]["values"], strict=True))
    return [b[s] - a[s] for s in sorted(a.keys() & b.keys())]


def paired_table(results: dict[str, dict[str, Any]], base: str = "spade") -> str:
    """SPADE minus each other arm, paired by seed: mean [95 % t-interval] and the per-seed
    differences (empty when SPADE has no finished seed)."""
    if base not in results or not results[base]["values"]:
        return ""
    lines = [
        "",
        f"| {ARM_LABELS[base]} minus | paired seeds | mean [95 % CI] | per seed |",
        "|---|---:|---|---|",
    ]
    for arm in results:
        diffs = paired(results, arm, base) if arm != base else []
        if not diffs:
            continue
        mean, lo, hi = t_interval(diffs)
        ci = f"[{lo:+.3f}, {hi:+.3f}]" if not math.isnan(lo) else "(one seed)"
        each = ", ".join(f"{d:+.3f}" for d in diffs)
        lines.append(f"| {ARM_LABELS[arm]} | {len(diffs)} | {mean:+.3f} {ci} | {each} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Left: each arm's held-out mean with its 95 % t-interval (band) and seeds (dots). Right:
    each arm's training return per cycle (its own pool's games, no hint), mean and 95 %
    t-interval over seeds, so a reader sees whether an arm's update had a signal at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    _heldout_bars(left, results)
    _training_curves(right, results)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _heldout_bars(ax: Any, results: dict[str, dict[str, Any]]) -> None:
    for i, r in enumerate(results.values()):
        if not r["values"]:
            continue
        mean, lo, hi = t_interval(r["values"])
        if not math.isnan(lo):
            ax.fill_between([i - 0.3, i + 0.3], lo, hi, alpha=0.25, color=f"C{i}")
        ax.hlines(mean, i - 0.3, i + 0.3, colors="black")
        ax.scatter([i] * len(r["values"]), r["values"], s=14, zorder=3, color=f"C{i}")
    ax.set_xticks(range(len(results)), list(results), fontsize=8)
    ax.set_ylabel("held-out return, no hint")
    ax.set_title("held-out: mean (line), 95 % t-interval (band), seeds (dots)", fontsize=9)


def _training_curves(ax: Any, results: dict[str, dict[str, Any]]) -> None:
    for i, (arm, r) in enumerate(results.items()):
        cycles = sorted(r["curve"])
        if not cycles:
            continue
        stats = [t_interval(r["curve"][c]) for c in cycles]
        ax.plot(cycles, [m for m, _, _ in stats], marker="o", ms=3, label=arm, color=f"C{i}")
        if all(not math.isnan(lo) for _, lo, _ in stats):
            lows, highs = [lo for _, lo, _ in stats], [hi for _, _, hi in stats]
            ax.fill_between(cycles, lows, highs, alpha=0.2, color=f"C{i}")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("cycle")
    ax.set_ylabel("training return, no hint (own pool)")
    ax.set_title("training: mean over seeds, 95 % t-interval (band)", fontsize=9)
    ax.legend(fontsize=7)


def run_one(run: Run) -> int:
    """Start, resume or skip one arm x seed run in a child ``spade`` process."""
    st = state(run)
    if st == "finished":
        return 0
    has_ckpt = any((run.run_dir / "checkpoints").glob("cycle_*"))
    if st == "partial" and has_ckpt:
        cmd = [sys.executable, "-m", "spade_train.cli", "resume", str(run.run_dir)]
    else:
        if st == "partial":  # no checkpoint: nothing to resume from, start that run again
            import shutil

            shutil.rmtree(run.run_dir)
        cmd = [sys.executable, "-m", "spade_train.cli", "train", "--recipe", "quickstart"]
        cmd += ["--run-dir", str(run.run_dir), *run.overrides()]
    return subprocess.call(cmd)


def execute(runs: list[Run], root: Path, log: Any = print) -> int:
    """Every run in turn, then the table and plot; 130 on Ctrl-C (finished runs kept)."""
    for i, run in enumerate(runs, 1):
        st = state(run)
        log(f"[{i}/{len(runs)}] {run.arm} seed {run.seed}: {st}")
        if st == "finished":
            continue
        started = time.perf_counter()
        rc = run_one(run)
        wall = time.perf_counter() - started
        log(f"[{i}/{len(runs)}] {run.arm} seed {run.seed}: rc {rc}, {wall:.0f} s")
        if rc == 0:
            record_wall(root, run, st, wall)
            freed = drop_optimizer_state(run)
            if freed:
                log(f"[{i}/{len(runs)}] {run.arm} seed {run.seed}: {freed / 2**30:.1f} GiB freed")
        if rc == 130:
            return 130
        if rc != 0:
            log(f"run {run.run_dir} failed (exit {rc}); fix it and run the command again")
            return rc
    write_results(runs, root)
    return 0


def drop_optimizer_state(run: Run) -> int:
    """A finished run keeps its last policy weights (to evaluate) but not the optimizer state
    beside them (twice the weights' size, needed only to train on): 15 runs of the embedded
    model would otherwise hold 15 x 1.5 GB. Returns the bytes freed; an unfinished run keeps
    everything it resumes from."""
    if state(run) != "finished":
        return 0
    freed = 0
    for path in (run.run_dir / "checkpoints").glob("cycle_*/*.trainer.pt"):
        freed += path.stat().st_size
        path.unlink()
    return freed


def record_wall(root: Path, run: Run, started_as: str, wall_s: float) -> None:
    """One line of ``wall.jsonl``: a run's child-process wall time (model load included), and
    whether it started ``new`` or resumed a ``partial`` run (then it is not a whole run's)."""
    root.mkdir(parents=True, exist_ok=True)
    line = {"arm": run.arm, "seed": run.seed, "from": started_as, "wall_s": round(wall_s, 3)}
    with (root / "wall.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")


def read_walls(root: Path) -> dict[tuple[str, int], float]:
    """Each whole run's last recorded wall time, by (arm, seed)."""
    path = root / "wall.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return {(r["arm"], r["seed"]): r["wall_s"] for r in rows if r.get("from") == "new"}


def write_results(runs: list[Run], root: Path) -> None:
    results = collect(runs)
    (root / "results.md").write_text(table(results))
    (root / "results.json").write_text(json.dumps(results, indent=1, default=str))
    plot(results, root / "rq1.png")
