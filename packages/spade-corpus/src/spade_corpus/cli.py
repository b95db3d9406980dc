"""``spade-corpus``: validate, verify, checksum, dedup, pack, stats and sample-grounding.

Each command lives in its own module as an ``add_arguments(parser)`` / ``run(args) -> int``
pair; this file only wires them. User mistakes (a missing file, a malformed JSONL line, a bad
schema) print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "COMMANDS"]

#: command -> (module, add-arguments function, run function, help)
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "validate": (
        "validate_cli",
        "add_arguments",
        "run",
        "validate environments (structural + sandboxed runtime checks)",
    ),
    "verify": (
        "checksum",
        "add_verify_arguments",
        "run_verify",
        "re-check every checksum and name every bad record",
    ),
    "checksum": (
        "checksum",
        "add_checksum_arguments",
        "run_checksum",
        "print the corpus manifest summary (counts, whole-corpus checksum)",
    ),
    "dedup": ("dedup", "add_arguments", "run", "find exact and near-duplicate environments"),
    "pack": ("pack", "add_arguments", "run", "convert between corpus directory, JSONL and Parquet"),
    "stats": (
        "stats",
        "add_arguments",
        "run",
        "statistics per skill, sizes, pass rate, difficulty; PNG chart",
    ),
    "sample-grounding": ("grounding", "add_arguments", "run", "print seeded grounding snippets"),
}


def _command(name: str):
    module_name, add_name, run_name, _ = COMMANDS[name]
    module = importlib.import_module(f"spade_corpus.{module_name}")
    return getattr(module, add_name), getattr(module, run_name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spade-corpus", description="SPADE corpus tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, _, _, help_text) in COMMANDS.items():
        add, _ = _command(name)
        add(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import spade_envs

    from .grounding import GroundingError

    args = build_parser().parse_args(argv)
    _, run = _command(args.command)
    try:
        return run(args)
    except (
        spade_envs.SpadeEnvsError,
        GroundingError,
        FileNotFoundError,
        NotADirectoryError,
        FileExistsError,
    ) as exc:
        print(f"spade-corpus: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug or a hostile input nobody foresaw: one line, not a traceback
        if os.environ.get("SPADE_CORPUS_TRACEBACK"):
            raise
        text = " ".join(str(exc).split())[:300]
        print(
            f"spade-corpus {args.command}: internal error: {type(exc).__name__}: {text} "
            "(set SPADE_CORPUS_TRACEBACK=1 to see where)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
