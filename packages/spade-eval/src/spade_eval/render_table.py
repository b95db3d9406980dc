"""``python -m spade_eval.render_table RESULTS... --format markdown|latex|csv [--plot out.png]``:
models as rows, suites as columns, cells ``mean ± stderr`` (percent)."""

from __future__ import annotations

import argparse
import sys

from .errors import SpadeEvalError
from .render import FORMATS, plot, read_results, render


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one line and exit 2."""
    p = argparse.ArgumentParser(prog="spade-eval table", description=__doc__)
    p.add_argument("results", nargs="+", help="results.json files or run directories")
    p.add_argument("--format", default="markdown", choices=FORMATS)
    p.add_argument("--plot", help="write a bar chart PNG here")
    args = p.parse_args(argv)
    try:
        results = read_results(args.results)
        sys.stdout.write(render(results, args.format))
        if args.plot:
            plot(results, args.plot)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
