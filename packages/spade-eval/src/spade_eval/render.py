"""Result tables: models as rows, suites as columns, cells ``mean ± stderr`` (percent); bar charts."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from .errors import EvalConfigError

FORMATS = ("markdown", "latex", "csv")


def read_results(paths: list[str]) -> list[dict[str, Any]]:
    """Load results.json files (or directories holding one)."""
    out = []
    for p in paths:
        path = Path(p) / "results.json" if Path(p).is_dir() else Path(p)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data["suites"], data["model"]  # noqa: B018 - both keys must exist
        except (OSError, ValueError, KeyError, TypeError):
            raise EvalConfigError(f"{path}: not a spade-eval results.json") from None
        out.append(data)
    return out


def table(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: model, then one ``mean ± stderr`` cell per suite (blank if absent)."""
    suites: list[str] = []
    for r in results:
        suites += [s for s in r["suites"] if s not in suites]
    rows = []
    for r in results:
        cells = [str(r["model"])]
        for s in suites:
            e = r["suites"].get(s)
            cells.append(f"{100 * e['mean']:.1f} ± {100 * e['stderr']:.1f}" if e else "")
        rows.append(cells)
    return ["model", *suites], rows


def render(results: list[dict[str, Any]], fmt: str) -> str:
    """The table as Markdown, LaTeX (booktabs) or CSV text."""
    header, rows = table(results)
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        esc = lambda s: s.replace("_", r"\_").replace("±", r"$\pm$")  # noqa: E731
        lines = [r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
                 " & ".join(esc(h) for h in header) + r" \\", r"\midrule"]  # fmt: skip
        lines += [" & ".join(esc(c) for c in r) + r" \\" for r in rows]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["model"] + [f"{s}_{k}" for s in header[1:] for k in ("mean", "stderr")])
        for r in results:
            row = [r["model"]]
            for s in header[1:]:
                e = r["suites"].get(s)
                row += [f"{e['mean']:.4f}", f"{e['stderr']:.4f}"] if e else ["", ""]
            w.writerow(row)
        return buf.getvalue()
    raise EvalConfigError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def plot(results: list[dict[str, Any]], out: str) -> None:
    """Grouped bar chart (suites on x, one bar per model) with stderr error bars, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header, _ = table(results)
    suites = header[1:]
    width = 0.8 / max(len(results), 1)
    fig, ax = plt.subplots(figsize=(max(4, 1.5 * len(suites)), 3.5))
    for i, r in enumerate(results):
        xs = [j + i * width for j in range(len(suites))]
        means = [100 * r["suites"].get(s, {}).get("mean", 0.0) for s in suites]
        errs = [100 * r["suites"].get(s, {}).get("stderr", 0.0) for s in suites]
        ax.bar(xs, means, width, yerr=errs, capsize=3, label=str(r["model"]))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(suites))], suites)
    ax.set_ylabel("score (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
