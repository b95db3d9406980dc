"""Corpus statistics: counts per skill and split, source sizes, validation pass rate, difficulty.

The validation pass rate counts every row of the validation manifest (rows of environments
that were rejected and so are not in the manifest included): ``valid`` rows over all rows.
Difficulty statistics cover every numeric (int or float, not bool, finite) key found in the
records' ``difficulty`` dicts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import spade_envs as se

from .pack import atomic_output, read_corpus

__all__ = ["corpus_stats", "write_stats_chart"]


def _summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
        "median": statistics.median(values),
    }


def _validation_stats(corpus: se.Corpus) -> dict[str, Any]:
    rows = list(corpus.validation.values())
    valid = sum(row.get("valid") is True for row in rows)
    reasons = Counter(
        str(row.get("reason") or "unknown") for row in rows if row.get("valid") is not True
    )
    skill_of = {r.id: r.skill for r in corpus.records}
    per_skill: dict[str, list[int]] = {}
    for row in rows:
        skill = skill_of.get(str(row.get("id"))) or row.get("skill")
        if isinstance(skill, str):
            counts = per_skill.setdefault(skill, [0, 0])
            counts[0] += row.get("valid") is True
            counts[1] += 1
    return {
        "rows": len(rows),
        "valid": valid,
        "invalid": len(rows) - valid,
        "pass_rate": valid / len(rows) if rows else None,
        "by_reason": dict(sorted(reasons.items())),
        "pass_rate_by_skill": {s: v / n for s, (v, n) in sorted(per_skill.items())},
        "summary": corpus.summary,
    }


def corpus_stats(corpus: se.Corpus) -> dict[str, Any]:
    """Statistics of a loaded corpus as a JSON-serializable dict (see the module docstring)."""
    chars = [len(corpus.sources[r.id]) for r in corpus.records]
    lines = [len(corpus.sources[r.id].splitlines()) for r in corpus.records]
    difficulty: dict[str, list[float]] = {}
    for record in corpus.records:
        for key, value in (record.difficulty or {}).items():
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                difficulty.setdefault(key, []).append(value)
    per_skill: dict[str, dict[str, Any]] = {}
    for record, size, count in zip(corpus.records, chars, lines, strict=True):
        entry = per_skill.setdefault(record.skill, {"count": 0, "chars": [], "lines": []})
        entry["count"] += 1
        entry["chars"].append(size)
        entry["lines"].append(count)
    return {
        "path": str(corpus.path),
        "total": len(corpus),
        "by_skill": corpus.counts_by_skill(),
        "by_split": dict(sorted(Counter(r.split for r in corpus.records).items())),
        "source_chars": {**_summary(chars), "total": sum(chars)},
        "source_lines": {**_summary(lines), "total": sum(lines)},
        "per_skill": {
            skill: {
                "count": e["count"],
                "mean_chars": statistics.fmean(e["chars"]),
                "mean_lines": statistics.fmean(e["lines"]),
            }
            for skill, e in sorted(per_skill.items())
        },
        "validation": _validation_stats(corpus),
        "difficulty": {key: _summary(values) for key, values in sorted(difficulty.items())},
    }


def write_stats_chart(
    corpus: se.Corpus, path: str | os.PathLike[str], stats: dict[str, Any] | None = None
) -> Path:
    """A PNG with three panels (environments per skill, source-size histogram, validation
    outcome), written atomically. ``stats`` is ``corpus_stats(corpus)`` when already computed."""
    stats = stats or corpus_stats(corpus)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (skills_ax, sizes_ax, valid_ax) = plt.subplots(
        1, 3, figsize=(15, 4.8), constrained_layout=True
    )
    fig.suptitle(f"{Path(stats['path']).name}: {stats['total']} environments", fontsize=14)

    _skills_panel(skills_ax, stats)
    _sizes_panel(sizes_ax, corpus, stats)
    _validation_panel(valid_ax, stats["validation"])

    target = Path(path)
    try:
        with atomic_output(target) as temp:
            fig.savefig(temp, format="png", dpi=110)
    finally:
        plt.close(fig)
    return target


def _skills_panel(skills_ax: Any, stats: dict[str, Any]) -> None:
    from matplotlib.ticker import MaxNLocator

    skills = list(stats["by_skill"])
    counts = [stats["by_skill"][s] for s in skills]
    bars = skills_ax.bar(skills, counts, color="#4C72B0")
    skills_ax.bar_label(bars)
    skills_ax.set_title("Environments per skill")
    skills_ax.set_ylabel("environments")
    skills_ax.tick_params(axis="x", rotation=30)
    skills_ax.set_ylim(0, max(counts or [1]) * 1.15)
    skills_ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _sizes_panel(sizes_ax: Any, corpus: se.Corpus, stats: dict[str, Any]) -> None:
    from matplotlib.ticker import MaxNLocator

    sizes = [len(corpus.sources[r.id]) / 1000 for r in corpus.records]
    sizes_ax.hist(sizes, bins=min(20, max(1, len(sizes))), color="#55A868", edgecolor="white")
    chars = stats["source_chars"]
    if chars.get("count"):
        sizes_ax.axvline(
            chars["mean"] / 1000,
            color="black",
            linestyle="--",
            label=f"mean {chars['mean'] / 1000:.1f}k chars",
        )
        sizes_ax.legend()
    sizes_ax.set_title("Source size")
    sizes_ax.set_xlabel("thousand characters")
    sizes_ax.set_ylabel("environments")
    sizes_ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _validation_panel(valid_ax: Any, validation: dict[str, Any]) -> None:
    if validation["rows"]:
        labels = ["valid", *validation["by_reason"]]
        values = [validation["valid"], *validation["by_reason"].values()]
        colors = ["#55A868"] + ["#C44E52"] * len(validation["by_reason"])
        bars = valid_ax.barh(labels[::-1], values[::-1], color=colors[::-1], height=0.6)
        valid_ax.bar_label(bars, padding=3)
        valid_ax.set_xlim(0, max(values) * 1.2)
        valid_ax.set_title(
            f"Validation: {validation['pass_rate']:.0%} pass ({validation['valid']}/{validation['rows']})"
        )
        valid_ax.set_xlabel("environments")
    else:
        valid_ax.text(0.5, 0.5, "no validation manifest", ha="center", va="center", fontsize=12)
        valid_ax.set_axis_off()
        valid_ax.set_title("Validation")


def _print_text(stats: dict[str, Any]) -> None:
    print(f"{stats['path']}: {stats['total']} environments")
    for skill, entry in stats["per_skill"].items():
        print(
            f"  {skill:14} {entry['count']:5}  mean {entry['mean_chars']:8.0f} chars {entry['mean_lines']:6.0f} lines"
        )
    chars, lines = stats["source_chars"], stats["source_lines"]
    if chars["count"]:
        print(
            f"  sizes: {chars['min']}-{chars['max']} chars (mean {chars['mean']:.0f}), {lines['min']}-{lines['max']} lines (mean {lines['mean']:.0f})"
        )
    validation = stats["validation"]
    if validation["rows"]:
        reasons = (
            ", ".join(f"{k} {v}" for k, v in validation["by_reason"].items()) or "none rejected"
        )
        print(
            f"  validation: {validation['valid']}/{validation['rows']} pass ({validation['pass_rate']:.1%}); {reasons}"
        )
    else:
        print("  validation: no validation manifest")
    for key, values in stats["difficulty"].items():
        print(
            f"  difficulty.{key}: mean {values['mean']:.3g}, min {values['min']:.3g}, max {values['max']:.3g} over {values['count']}"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus stats``."""
    parser.add_argument("path", help="corpus directory, .jsonl or .parquet file, or 'example'")
    parser.add_argument("--png", help="also write a chart to this PNG file")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")


def run(args: argparse.Namespace) -> int:
    """``spade-corpus stats PATH``: 0 on success, 2 with one line naming the problem otherwise."""
    try:
        corpus = read_corpus(args.path)
        stats = corpus_stats(corpus)
        if args.png:
            write_stats_chart(corpus, args.png, stats)
    except se.CorpusError as exc:
        print(f"spade-corpus stats: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"spade-corpus stats: error: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        _print_text(stats)
    if args.png:
        print(f"wrote {args.png}", file=sys.stderr if args.json else sys.stdout)
    return 0
