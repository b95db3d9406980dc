"""Curriculum plots of a run, drawn from its ``metrics.jsonl`` (matplotlib, Agg backend)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PLOTS = ("validity", "regret", "returns", "pool")


def _series(rows: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)):
            xs.append(int(row["cycle"]))
            ys.append(float(value))
    return xs, ys


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


def _line_plot(rows, keys: Sequence[tuple[str, str]], title: str, ylabel: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for key, label in keys:
        xs, ys = _series(rows, key)
        if xs:
            ax.plot(xs, ys, marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel("cycle")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    _save(fig, path)


def write_plots(rows: Sequence[dict[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write validity.png, regret.png, returns.png and pool.png into ``out_dir`` (and eval.png
    when the rows carry in-loop evaluation scores)."""
    out = Path(out_dir)
    rows = sorted(rows, key=lambda r: r.get("cycle", 0))
    paths = [out / f"{name}.png" for name in PLOTS]
    _line_plot(
        rows,
        [("design/validity_rate", "valid designs")],
        "Designer validity rate",
        "fraction valid",
        paths[0],
    )
    _line_plot(
        rows,
        [("reward/regret_mean", "mean regret"), ("reward/designer_mean", "designer reward")],
        "Hint-based regret",
        "return with hint − without",
        paths[1],
    )
    _line_plot(
        rows,
        [("play/return_hint", "with hint"), ("play/return_nohint", "without hint")],
        "Agent returns",
        "mean episode return",
        paths[2],
    )
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
    _save(fig, paths[3])
    scores = sorted(
        {k for r in rows for k in r if k.startswith("eval/") and k.endswith(("/mean", "pass1"))}
    )
    if scores:  # in-loop evaluation (eval.every): one line per suite score
        path = out / "eval.png"
        _line_plot([r for r in rows if any(k in r for k in scores)],
                   [(k, k[len("eval/"):]) for k in scores], "In-loop evaluation", "score", path)  # fmt: skip
        paths.append(path)
    return paths
