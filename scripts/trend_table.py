"""Print a run's measured trend as a markdown table: means over blocks of cycles.

    uv run python scripts/trend_table.py RUN_DIR [--block 5]

Columns: designs valid and new (not a copy of a reference game), mean return on the pool with
and without the hint, on the held-out games (when the run played them), mean regret, the
agent's and designer's advantage spread, parsed agent turns, and seconds per cycle.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COLUMNS = (
    ("valid", "design/valid", "sum"),
    ("new", "design/new", "sum"),
    ("designs", "design/completions", "sum"),
    ("R pool hint", "play/return_hint", "mean"),
    ("R pool no hint", "play/return_nohint", "mean"),
    ("R held-out hint", "heldout/return_hint", "mean"),
    ("R held-out no hint", "heldout/return_nohint", "mean"),
    ("regret", "reward/regret_mean", "mean"),
    ("adv std agent", "adv/agent_std", "min"),
    ("adv std designer", "adv/designer_std", "min"),
    ("parsed", "play/parsed_rate", "mean"),
    ("s/cycle", "time/cycle_s", "mean"),
)


def _cell(values: list[float], how: str) -> str:
    if not values:
        return "-"
    if how == "sum":
        return str(int(sum(values)))
    value = min(values) if how == "min" else sum(values) / len(values)
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"


def table(rows: list[dict], block: int) -> str:
    head = ["cycles", *(c[0] for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for start in range(0, len(rows), block):
        part = rows[start : start + block]
        cells = [f"{part[0]['cycle']}-{part[-1]['cycle']}"]
        for _, key, how in COLUMNS:
            values = [float(r[key]) for r in part if isinstance(r.get(key), (int, float))]
            cells.append(_cell(values, how))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--block", type=int, default=5, help="cycles per row (default 5)")
    args = parser.parse_args()
    metrics = args.run_dir / "metrics.jsonl"
    if not metrics.is_file():
        print(f"error: {metrics} not found; pass a spade run directory", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    print(table(sorted(rows, key=lambda r: r["cycle"]), max(1, args.block)))
    print("\n(adv std columns: the smallest per-cycle value in the block)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
