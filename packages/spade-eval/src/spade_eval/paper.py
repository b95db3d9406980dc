"""Paper rows: the RQ1 (reasoning) and RQ2 (tool use) columns of the SPADE paper's tables.

Each column reads one flat metric key, the same key upstream's offline driver reports
(``aime2025_pass1``, ``gem_eval/category_rg_math/win_rate``, ``acebench/en/overall`` …).
A cell is the value in percent with one decimal; a missing or non-numeric value is an em-dash.

Three inputs give those keys: upstream's ``results.json`` (``{"metrics": {...}}``, flat as in
upstream's tests or nested one level per suite as its driver writes it), a bare flat mapping,
and spade-eval's own ``results.json``, whose suites write the same keys under ``metrics``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from .errors import EvalConfigError

RQ1_COLUMNS: dict[str, str] = {
    "AIME-25": "aime2025_pass1",
    "AIME-26": "aime2026_pass1",
    "GPQA-Diamond": "gpqa_diamond_avg_at_n",
    "LiveCodeBench": "livecodebench_pass_at_1",
    "RG:Math": "gem_eval/category_rg_math/win_rate",
    "RG:Algorithmic": "gem_eval/category_rg_algorithmic/win_rate",
    "RG:Cognition": "gem_eval/category_rg_cognition/win_rate",
    "RG:Logic": "gem_eval/category_rg_logic/win_rate",
}
RQ2_COLUMNS: dict[str, str] = {
    "BFCL-v4": "bfcl_overall_acc",
    "Tau2-Retail": "gem_eval/tau2_retail_base/pass_at_1",
    "Tau2-Airline": "gem_eval/tau2_airline_base/pass_at_1",
    "Tau2-Telecom": "gem_eval/tau2_telecom_base/pass_at_1",
    "ACEBench-N": "acebench/en/normal",
    "ACEBench-S": "acebench/en/special",
    "ACEBench-A": "acebench/en/agent",
    "ACEBench": "acebench/en/overall",
}
COLUMN_MAPS: dict[str, dict[str, str]] = {"RQ1": RQ1_COLUMNS, "RQ2": RQ2_COLUMNS}
MISSING = "—"


def flat_metrics(data: dict[str, Any]) -> dict[str, Any]:
    """The flat metric mapping of a results document (see the module docstring)."""
    metrics = data.get("metrics", data)
    if not isinstance(metrics, dict):
        return {}
    flat = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
    for inner in metrics.values():  # upstream's driver nests one level: {suite: {key: v}}
        if isinstance(inner, dict):
            for k, v in inner.items():
                flat.setdefault(k, v)
    return flat


def load_metrics(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``(label, flat metrics)`` of a ``results.json`` (or a directory holding one); the label
    is the document's ``model`` (ours) or ``ckpt`` (upstream's), else the path."""
    p = Path(path)
    p = p / "results.json" if p.is_dir() else p
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise EvalConfigError(f"{p}: not a readable results.json") from None
    if not isinstance(data, dict):
        raise EvalConfigError(f"{p}: not a results.json (a JSON object is expected)")
    label = data.get("model") or data.get("ckpt") or str(path)
    return str(label), flat_metrics(data)


def cell(value: Any) -> str:
    """``0.474`` -> ``"47.4"``; None or anything not a number -> an em-dash."""
    if value is None:
        return MISSING
    try:
        return f"{float(value) * 100:.1f}"
    except (TypeError, ValueError):
        return MISSING


def columns(rq: str) -> dict[str, str]:
    """The column map of ``rq`` (``RQ1`` or ``RQ2``)."""
    if rq not in COLUMN_MAPS:
        raise EvalConfigError(f"unknown --rq {rq!r}; choose from {', '.join(COLUMN_MAPS)}")
    return COLUMN_MAPS[rq]


def rows(rq: str, named: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """Header ``Method, <columns>`` and one row of cells per ``(method name, metrics)``."""
    cols = columns(rq)
    body = [[name] + [cell(m.get(key)) for key in cols.values()] for name, m in named]
    return ["Method", *cols], body


def render_rows(rq: str, named: list[tuple[str, dict[str, Any]]], fmt: str) -> str:
    """Markdown (header, separator, rows), CSV (header, rows) or LaTeX (rows only, to paste
    into the paper's tabular)."""
    header, body = rows(rq, named)
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body]) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows([header, *body])
        return buf.getvalue()
    if fmt == "latex":
        return "".join(" & ".join(r) + " \\\\\n" for r in body)
    raise EvalConfigError(f"unknown format {fmt!r}; choose from markdown, csv, latex")


def plot_rows(rq: str, named: list[tuple[str, dict[str, Any]]], out: str) -> None:
    """Grouped bars (columns on x, one bar per method); a missing cell draws no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = columns(rq)
    width = 0.8 / max(len(named), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(cols)), 3.5))
    for i, (name, metrics) in enumerate(named):
        xs, ys = [], []
        for j, key in enumerate(cols.values()):
            text = cell(metrics.get(key))
            if text != MISSING:
                xs.append(j + i * width)
                ys.append(float(text))
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cols))], list(cols), rotation=30)
    ax.set_ylabel(f"{rq} score (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = f"{out}.tmp.png"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, out)
