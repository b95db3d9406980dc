"""Curriculum plots of one run, or of several runs of one recipe with different seeds, drawn
from ``metrics.jsonl`` (matplotlib, Agg backend).

What a plot shows is what was measured, and no more:

* a cycle whose row is missing, or whose value is ``None`` (no valid design, so no regret),
  is a gap in the line, never bridged; a metric a run measures only every few cycles (the
  held-out games) is drawn at those cycles;
* nothing constant by construction: the advantage panel shows the spread of the raw rewards
  before per-role normalization and the share of groups with no spread at all (those train
  nothing), not the normalized advantages (whose spread is 1 by construction);
* the counts behind every point (designs, episodes, groups) have their own panel;
* several runs: the line is the mean over the runs that measured the cycle, the band their
  minimum to maximum, the legend says how many runs.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PLOTS = ("validity", "regret", "returns", "pool", "summary")

Rows = Sequence[dict[str, Any]]
Series = list[tuple[str, str]]

_DESIGNS: Series = [("design/validity_rate", "valid"), ("design/new_rate", "valid and new")]
_RETURNS: Series = [
    ("play/return_hint", "pool, with hint"),
    ("play/return_nohint", "pool, without hint"),
    ("heldout/return_hint", "held-out, with hint"),
    ("heldout/return_nohint", "held-out, without hint"),
]
_REGRET: Series = [
    ("reward/regret_mean", "mean regret"),
    ("reward/designer_mean", "designer reward"),
]
_SPREAD: Series = [("adv/agent_reward_std", "agent"), ("adv/designer_reward_std", "designer")]
_FLAT: Series = [("adv/agent_flat_groups", "agent"), ("adv/designer_flat_groups", "designer")]
_COUNTS: Series = [
    ("design/completions", "designs"),
    ("play/episodes", "episodes (half with the hint)"),
    ("adv/designer_groups", "designer groups"),
    ("adv/agent_groups", "agent groups (games)"),
]


def _with_new_rate(rows: Rows) -> list[dict[str, Any]]:
    """Rows with ``design/new_rate``: new (not copied) valid designs over all designs."""
    out = []
    for r in rows:
        n, new = r.get("design/completions"), r.get("design/new")
        extra = {"design/new_rate": new / n} if isinstance(new, int) and n else {}
        out.append({**r, **extra})
    return out


def _points(rows: Rows, key: str, cycles: Sequence[int]) -> list[float | None]:
    """One value per cycle: the number, NaN for a gap (no row, or a value of None), None
    where the run does not measure the key at that cycle (its row lacks the key)."""
    by_cycle = {int(r["cycle"]): r for r in rows}
    out: list[float | None] = []
    for c in cycles:
        row = by_cycle.get(c)
        if row is None:
            out.append(math.nan)
        elif key not in row:
            out.append(None)
        else:
            v = row[key]
            out.append(float(v) if isinstance(v, (int, float)) else math.nan)
    return out


def _draw(
    ax: Any,
    runs: Sequence[Rows],
    series: Series,
    title: str,
    ylabel: str,
    ylim: tuple[float | None, float | None] = (None, None),
) -> None:
    seen = [int(r["cycle"]) for rows in runs for r in rows]
    cycles = list(range(min(seen), max(seen) + 1)) if seen else []
    drawn = False
    for key, label in series:
        per_run = [_points(rows, key, cycles) for rows in runs]
        xs: list[int] = []
        mean: list[float] = []
        low: list[float] = []
        high: list[float] = []
        counts: list[int] = []
        for i, c in enumerate(cycles):
            got: list[float] = [v for p in per_run if (v := p[i]) is not None]
            if not got:
                continue  # not measured at this cycle by any run: no point, no gap
            finite = [v for v in got if not math.isnan(v)]
            xs.append(c)
            counts.append(len(finite))
            mean.append(sum(finite) / len(finite) if finite else math.nan)
            low.append(min(finite) if finite else math.nan)
            high.append(max(finite) if finite else math.nan)
        if not any(not math.isnan(m) for m in mean):
            if xs:  # recorded, but never with a value (no valid design: no regret)
                ax.plot([], [], marker="o", markersize=3.5, label=f"{label}: no value yet")
                drawn = True
            continue
        name = label if len(runs) == 1 else f"{label} (mean of {max(counts)} runs)"
        (line,) = ax.plot(xs, mean, marker="o", markersize=3.5, label=name)
        if len(runs) > 1:
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
        drawn = True
    ax.set_title(title)
    ax.set_xlabel("cycle")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    low_lim, high_lim = ylim
    if low_lim is not None or high_lim is not None:
        ax.set_ylim(bottom=low_lim, top=high_lim)
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "not recorded by this run", ha="center", va="center",
                transform=ax.transAxes, color="grey")  # fmt: skip
    if cycles:
        ax.set_xlim(cycles[0] - 0.5, cycles[-1] + 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)


Panel = tuple[Sequence[Rows], Series, str, str, tuple[float | None, float | None]]
_SHARE = (-0.03, 1.03)


def _panels(runs: Sequence[Rows]) -> list[Panel]:
    with_new = [_with_new_rate(rows) for rows in runs]
    return [
        (with_new, _DESIGNS, "Designs", "share of the cycle's designs", _SHARE),
        (runs, _RETURNS, "Agent returns", "mean episode return", (None, None)),
        (runs, _REGRET, "Hint-based regret", "return with hint − without", (None, None)),
        (runs, _SPREAD, "Reward spread before normalization", "std of the role's raw rewards",
         (0.0, None)),
        (runs, _FLAT, "Groups without signal", "share of groups, all rewards equal", _SHARE),
        (runs, _COUNTS, "What each point stands for", "count in the cycle", (0.0, None)),
    ]  # fmt: skip


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)


def _single(panel: Panel, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    _draw(ax, *panel)
    _save(fig, path)


def _pool(rows: Rows, path: Path) -> None:
    """Environments in the pool by skill, stacked, one bar per cycle (the first run's)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    cycles = [int(r["cycle"]) for r in rows]
    skills = sorted({s for r in rows for s in (r.get("pool/skills") or {})})
    bottom = [0.0] * len(rows)
    for skill in skills:
        counts = [float((r.get("pool/skills") or {}).get(skill, 0)) for r in rows]
        ax.bar(cycles, counts, bottom=bottom, label=skill)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.set_title("Environment pool by skill")
    ax.set_xlabel("cycle")
    ax.set_ylabel("environments")
    if skills:
        ax.legend(fontsize=7, ncol=2)
    _save(fig, path)


def write_run_plots(runs: Sequence[Rows], out_dir: str | os.PathLike[str]) -> list[Path]:
    """validity.png, regret.png, returns.png, pool.png and summary.png (all six panels in
    one figure) for one run or several (seeds of one recipe), and eval.png when the rows
    carry in-loop evaluation scores. Each file is written atomically."""
    out = Path(out_dir)
    runs = [sorted(rows, key=lambda r: r.get("cycle", 0)) for rows in runs]
    paths = [out / f"{name}.png" for name in PLOTS]
    panels = _panels(runs)
    _single(panels[0], paths[0])
    _single(panels[2], paths[1])
    _single(panels[1], paths[2])
    _pool(runs[0], paths[3])
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.2))
    for ax, panel in zip(axes.flat, panels, strict=True):
        _draw(ax, *panel)
    if len(runs) > 1:
        fig.suptitle(f"{len(runs)} runs: line = mean, band = min to max over the runs")
    fig.tight_layout()
    _save(fig, paths[4])
    scores = sorted(
        {
            k
            for rows in runs
            for r in rows
            for k in r
            if k.startswith("eval/") and k.endswith(("/mean", "pass1"))
        }
    )
    if scores:  # in-loop evaluation (eval.every): one line per suite score
        path = out / "eval.png"
        series = [(k, k[len("eval/") :]) for k in scores]
        _single((runs, series, "In-loop evaluation", "score", (None, None)), path)
        paths.append(path)
    return paths


def write_plots(rows: Rows, out_dir: str | os.PathLike[str]) -> list[Path]:
    """The plots of one run (see :func:`write_run_plots`)."""
    return write_run_plots([rows], out_dir)
