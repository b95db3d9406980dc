"""``spade-eval``: ``spade-eval run ...`` (or just the run flags) and ``spade-eval table ...``."""

from __future__ import annotations

import sys

from . import render_table, run


def main(argv: list[str] | None = None) -> int:
    """Dispatch to ``run`` (default) or ``table``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "table":
        return render_table.main(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main())
