"""``spade-eval table`` / ``python -m spade_eval.render_table``: result tables.

Two modes. Without ``--rq``: models as rows, suites as columns, cells ``mean ± stderr``
(percent). With ``--rq RQ1|RQ2``: the paper's row for each results file, named by
``--method-name`` (repeat it once per file; default the model name), cells in percent with
one decimal and an em-dash where a metric is missing. Both accept ``--plot out.png``.
"""

from __future__ import annotations

import argparse
import sys

from . import paper
from .errors import EvalConfigError, SpadeEvalError
from .render import FORMATS, plot, read_results, render


def parser() -> argparse.ArgumentParser:
    """The table command's argument parser."""
    p = argparse.ArgumentParser(prog="spade-eval table", description=__doc__)
    p.add_argument("results", nargs="*", help="results.json files or run directories")
    p.add_argument("--results", dest="more", action="append", default=[],
                   help="a results.json (upstream's or ours); may be repeated")  # fmt: skip
    p.add_argument("--rq", choices=list(paper.COLUMN_MAPS), help="render paper rows")
    p.add_argument("--method-name", action="append", default=[],
                   help="row name for --rq (once per results file)")  # fmt: skip
    p.add_argument("--format", default="markdown", choices=FORMATS)
    p.add_argument("--plot", help="write a bar chart PNG here")
    return p


def _paper(args: argparse.Namespace, paths: list[str]) -> str:
    names = args.method_name
    if names and len(names) != len(paths):
        raise EvalConfigError(
            f"{len(names)} --method-name for {len(paths)} results files; give one per file"
        )
    named = []
    for i, path in enumerate(paths):
        label, metrics = paper.load_metrics(path)
        named.append((names[i] if names else label, metrics))
    if args.plot:
        paper.plot_rows(args.rq, named, args.plot)
    return paper.render_rows(args.rq, named, args.format)


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one line and exit 2."""
    args = parser().parse_args(argv)
    paths = [*args.results, *args.more]
    try:
        if not paths:
            raise EvalConfigError("no results given; pass results.json files or run directories")
        if args.rq:
            sys.stdout.write(_paper(args, paths))
            return 0
        if args.method_name:
            raise EvalConfigError("--method-name needs --rq RQ1 or --rq RQ2")
        results = read_results(paths)
        sys.stdout.write(render(results, args.format))
        if args.plot:
            plot(results, args.plot)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
