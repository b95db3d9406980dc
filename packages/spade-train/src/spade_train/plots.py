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

PLOTS = ("validity", "regret", "returns", "pool", "summary")

_RETURNS = (
    ("play/return_hint", "pool, with hint"),
    ("play/return_nohint", "pool, without hint"),
    ("heldout/return_hint", "held-out, with hint"),
    ("heldout/return_nohint", "held-out, without hint"),
)


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
    _draw(ax, rows, keys, title, ylabel)
    _save(fig, path)


def _draw(ax: Any, rows, keys: Sequence[tuple[str, str]], title: str, ylabel: str) -> None:
    for key, label in keys:
        xs, ys = _series(rows, key)
        if xs:
            ax.plot(xs, ys, marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel("cycle")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _new_rate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``design/new_rate``: new (not copied) valid designs over all designs."""
    out = []
    for r in rows:
        n = r.get("design/completions")
        new = r.get("design/new")
        extra = {"design/new_rate": new / n} if isinstance(new, int) and n else {}
        out.append({**r, **extra})
    return out


def _summary(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One figure of the signals a run must keep alive: validity, returns, regret, spread."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4))
    _draw(axes[0][0], _new_rate(rows),
          [("design/validity_rate", "valid"), ("design/new_rate", "valid and new")],
          "Designs", "fraction of designs")  # fmt: skip
    _draw(axes[0][1], rows, _RETURNS, "Agent returns", "mean episode return")
    _draw(axes[1][0], rows, [("reward/regret_mean", "mean regret")], "Hint-based regret",
          "return with hint − without")  # fmt: skip
    _draw(axes[1][1], rows,
          [("adv/agent_std", "agent"), ("adv/designer_std", "designer")],
          "Advantage spread", "std of the normalized advantages (0: no signal)")  # fmt: skip
    fig.tight_layout()
    _save(fig, path)


def write_plots(rows: Sequence[dict[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write validity.png, regret.png, returns.png, pool.png and summary.png (the four signals
    in one figure) into ``out_dir`` (and eval.png
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
        _RETURNS,
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
    _summary(rows, paths[4])
    scores = sorted(
        {k for r in rows for k in r if k.startswith("eval/") and k.endswith(("/mean", "pass1"))}
    )
    if scores:  # in-loop evaluation (eval.every): one line per suite score
        path = out / "eval.png"
        _line_plot([r for r in rows if any(k in r for k in scores)],
                   [(k, k[len("eval/"):]) for k in scores], "In-loop evaluation", "score", path)  # fmt: skip
        paths.append(path)
    return paths
