"""What one arm of ``spade experiment rq1-mini`` costs, per run and per cycle, as a ratio
to the fixed-starter arm of the same experiment root.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_experiment.py \\
        --root /work/runs/rq1-tiny [--size tiny] [--seeds 3] [--no-run] [--json out.json]

Without ``--no-run`` it first runs (or resumes: finished runs are skipped)
``spade experiment rq1-mini --size SIZE --seeds SEEDS --root ROOT``, so every arm's numbers come
from the same machine and the same sitting. It then reads each run's ``metrics.jsonl``: the
loop's own ``time/cycle_s`` per cycle and its phases (``time/design_s``, ``time/play_s``,
``time/update_s``, ``time/heldout_s``; model loading and process start are not in them) and
the experiment's ``wall.jsonl`` (each run's child-process wall time, model load included), and
prints, per arm, the mean seconds per cycle, per run (loop) and per run (wall) over seeds,
each phase's mean, and the ratios of the arm's cycle and wall times to the fixed-starter arm's.
That arm plays and trains on SPADE's seed pool (the starter training games) with no designer,
so SPADE's ratio is what designing, validating and the hinted plays cost; the no-training arm
plays one game a cycle and is no baseline for cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from spade_train import experiment as ex

PHASES = ("design_s", "play_s", "update_s", "heldout_s")
BASELINE = "fixed-starter"


def arm_costs(runs: list[ex.Run]) -> dict[str, dict[str, Any]]:
    """Per arm: seconds per cycle and per run (means over the finished seeds) and phases."""
    out: dict[str, dict[str, Any]] = {}
    walls = ex.read_walls(runs[0].root) if runs else {}
    for run in runs:
        rows = [r for r in ex.read_rows(run.run_dir) if "time/cycle_s" in r]
        if ex.state(run) != "finished" or not rows:
            continue
        empty: dict[str, list[float]] = {"cycle_s": [], "run_s": [], "wall_s": []}
        arm = out.setdefault(run.arm, {**empty, **{p: [] for p in PHASES}})
        if (run.arm, run.seed) in walls:
            arm["wall_s"].append(walls[(run.arm, run.seed)])
        arm["cycle_s"] += [float(r["time/cycle_s"]) for r in rows]
        arm["run_s"].append(sum(float(r["time/cycle_s"]) for r in rows))
        for p in PHASES:
            arm[p] += [float(r.get(f"time/{p}", 0.0)) for r in rows]
    return {
        a: {k: statistics.fmean(v) if v else float("nan") for k, v in c.items()}
        | {"seeds": len(c["run_s"])}
        for a, c in out.items()
    }


def _ratio(c: dict[str, Any], base: dict[str, Any], key: str) -> str:
    value = c[key] / base[key] if base and base[key] else float("nan")
    return "n/a" if value != value else f"{value:.2f}"


def table(costs: dict[str, dict[str, Any]]) -> str:
    base = costs.get(BASELINE, {})
    ratio = f"x {BASELINE}"
    cols = ["s / cycle", ratio, "s / run (loop)", "s / run (wall)", ratio]
    head = "| arm | seeds | " + " | ".join(cols) + " | " + " | ".join(PHASES) + " |"
    lines = [head, "|---" + "|---:" * (1 + len(cols) + len(PHASES)) + "|"]
    for arm, c in costs.items():
        cells = [
            f"{c['cycle_s']:.1f}",
            _ratio(c, base, "cycle_s"),
            f"{c['run_s']:.1f}",
            f"{c['wall_s']:.1f}",
            _ratio(c, base, "wall_s"),
            *(f"{c[p]:.1f}" for p in PHASES),
        ]
        lines.append(f"| {arm} | {c['seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--size", default="tiny", choices=list(ex.SIZES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-run", action="store_true", help="read the root's runs only")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.no_run:
        cmd = [sys.executable, "-m", "spade_train.cli", "experiment", "rq1-mini"]
        cmd += ["--size", args.size, "--seeds", str(args.seeds), "--root", str(args.root)]
        rc = subprocess.call(cmd)
        if rc != 0:
            return rc
    root = args.root / args.size
    costs = arm_costs(ex.plan(args.size, args.seeds, root))
    if not costs:
        print(f"no finished runs under {root}", file=sys.stderr)
        return 1
    print(table(costs))
    if args.json:
        args.json.write_text(json.dumps(costs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
