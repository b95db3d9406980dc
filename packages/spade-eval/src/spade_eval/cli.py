"""``spade-eval``: ``run`` (the default), ``table``, ``list``, ``prepare-aime``, ``setup-bfcl``,
``setup-acebench``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import render_table, run
from .errors import SpadeEvalError
from .runner import load_config
from .suites import get_suite, suite_names


def list_suites(argv: list[str]) -> int:
    """Print every suite, the data it reads under ``--config`` and whether that data is there."""
    p = argparse.ArgumentParser(prog="spade-eval list", description=list_suites.__doc__)
    p.add_argument("--config", default="paper", help="config whose suite settings to check")
    args = p.parse_args(argv)
    try:
        settings = load_config(args.config).get("suites") or {}
        for name in suite_names():
            suite = get_suite(name)
            needs_fn = getattr(suite, "data_needs", None)
            cfg = dict(settings.get(name) or {})
            cfg.pop("sampling", None)
            needs = needs_fn(cfg) if needs_fn else []
            if not needs:
                print(f"{name}: ships its data")
            for need in needs:
                state = "present" if need.present else f"MISSING ({need.how})"
                print(f"{name}: {need.path}: {state}")
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def prepare_aime(argv: list[str]) -> int:
    """Add the boxed instruction to a raw AIME JSONL and write it where the aime suite reads."""
    from .suites import aime

    p = argparse.ArgumentParser(prog="spade-eval prepare-aime", description=prepare_aime.__doc__)
    p.add_argument("raw", help='JSONL of {"prompt": [messages], "label": ...} records')
    p.add_argument("--out", required=True, help="e.g. $WORKSPACE_DIR/aime-2025/aime-2025.jsonl")
    args = p.parse_args(argv)
    try:
        if not Path(args.raw).is_file():
            raise SpadeEvalError(f"{args.raw}: no such file")
        n = aime.prepare(Path(args.raw), Path(args.out))
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {n} records to {args.out}")
    return 0


def setup_bfcl(argv: list[str]) -> int:
    """Create the isolated environment the bfcl suite runs bfcl-eval in."""
    from .suites import bfcl

    p = argparse.ArgumentParser(prog="spade-eval setup-bfcl", description=setup_bfcl.__doc__)
    p.add_argument(
        "--venv", help="where (default $SPADE_BFCL_VENV or ~/.cache/spade-eval/bfcl-venv)"
    )
    args = p.parse_args(argv)
    try:
        where = bfcl.setup(Path(args.venv) if args.venv else None)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"bfcl-eval installed in {where}; export SPADE_BFCL_VENV={where}")
    return 0


def setup_acebench(argv: list[str]) -> int:
    """Create the interpreter environment the acebench suite runs ACEBench with."""
    from .suites import acebench

    p = argparse.ArgumentParser(
        prog="spade-eval setup-acebench", description=setup_acebench.__doc__
    )
    p.add_argument("--venv", help="where (default ~/.cache/spade-eval/acebench-venv)")
    args = p.parse_args(argv)
    try:
        where = acebench.setup(Path(args.venv) if args.venv else None)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"ACEBench's packages installed in {where}; export ACEBENCH_PYTHON={where}/bin/python")
    return 0


def setup_tau2(argv: list[str]) -> int:
    """Create tau2-bench's environment from a clone (it is not on PyPI)."""
    from .suites import tau2

    p = argparse.ArgumentParser(prog="spade-eval setup-tau2", description=setup_tau2.__doc__)
    p.add_argument("--source", required=True, help="a clone of sierra-research/tau2-bench")
    p.add_argument("--venv", help="where (default ~/.cache/spade-eval/tau2-venv)")
    args = p.parse_args(argv)
    try:
        where = tau2.setup(Path(args.source), Path(args.venv) if args.venv else None)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"tau2-bench installed in {where}; export TAU2_PYTHON={where}/bin/python "
        f"TAU2_DATA_DIR={Path(args.source).resolve()}/data"
    )
    return 0


COMMANDS = {"table": render_table.main, "list": list_suites, "prepare-aime": prepare_aime,
            "setup-bfcl": setup_bfcl, "setup-acebench": setup_acebench,
            "setup-tau2": setup_tau2}  # fmt: skip

SUMMARIES = {
    "run": "score a checkpoint or an endpoint on suites (the default: bare flags mean run)",
    "table": "render results directories as the paper's tables",
    "list": "every suite, the data it reads and whether that data is there",
    "prepare-aime": "add the boxed instruction to a raw AIME JSONL",
    "setup-bfcl": "create the isolated environment the bfcl suite runs in",
    "setup-acebench": "create the interpreter the ACEBench suite runs in",
    "setup-tau2": "create the isolated environment the tau2 suite runs in",
}


def usage() -> str:
    """The top-level help: one line per command."""
    width = max(map(len, SUMMARIES))
    lines = ["usage: spade-eval COMMAND [ARGS...]   (spade-eval COMMAND --help for its flags)", ""]
    lines += [f"  {name:<{width}}  {text}" for name, text in SUMMARIES.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; bare flags mean ``run``."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if argv[0] == "run":
        argv = argv[1:]
    elif not argv[0].startswith("-"):
        names = ", ".join(SUMMARIES)
        print(f"error: unknown command {argv[0]!r}; the commands are {names}", file=sys.stderr)
        return 2
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main())
