"""The ``spade-corpus validate`` command: validate environment sources (files, a directory, a
corpus) and print a summary; ``--out`` writes every report as JSON (atomically, umask-honoured)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import spade_envs as se

from .validate import (
    ValidationItem,
    corpus_items,
    validate_many,
    validation_summary,
)


class _UserError(Exception):
    """A mistake in the command line or its inputs: one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus validate``."""
    parser.description = (
        "Validate environments: a corpus (directory, .jsonl, .parquet or 'example') or single "
        ".py files with --hint. Exit 0 when all are valid, 1 when some are not, 2 on bad input."
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="corpus directory, .jsonl/.parquet file, 'example', or an environment .py file",
    )
    parser.add_argument("--hint", metavar="TEXT", help="the privileged hint of the .py files given")
    parser.add_argument(
        "--max-turns",
        type=int,
        default=se.DEFAULT_MAX_TURNS,
        metavar="N",
        help="turn limit for .py files (default %(default)s)",
    )
    parser.add_argument(
        "--out", metavar="REPORT.json", help="write the JSON report here (atomically)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="environments validated at once (default %(default)s)",
    )
    parser.add_argument(
        "--seed-root",
        type=int,
        metavar="N",
        help="draw the validation seeds from root N (default: a fresh root, printed, so a "
        "verdict can be reproduced; no fixed seed list a designer could learn)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=5,
        metavar="N",
        help="seeds per environment (default %(default)s)",
    )
    parser.add_argument("--no-progress", action="store_true", help="do not show the progress bar")


def _read_items(
    paths: Sequence[str], hint: str | None, max_turns: int
) -> tuple[list[ValidationItem], dict[str, str]]:
    items: list[ValidationItem] = []
    skills: dict[str, str] = {}
    py_files = [p for p in paths if p.endswith(".py")]
    if py_files and hint is None:
        raise _UserError(f"{py_files[0]}: a .py file needs its privileged hint; pass --hint TEXT")
    if hint is not None and not py_files:
        raise _UserError("--hint applies to .py files only; a corpus carries its own hints")
    for path in paths:
        if path.endswith(".py"):
            try:
                source = Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise _UserError(f"{path}: no such file; check the path") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise _UserError(
                    f"{path}: cannot read it as UTF-8 text ({type(exc).__name__}); pass a Python source file"
                ) from None
            items.append(ValidationItem(source, hint or "", path, None, max_turns))
            continue
        try:
            corpus = se.load_corpus(path)
        except se.CorpusError as exc:
            raise _UserError(str(exc)) from None
        items += corpus_items(corpus)
        skills.update({rec.id: rec.skill for rec in corpus.records})
    return items, skills


def run(args: argparse.Namespace) -> int:
    """Run ``spade-corpus validate``; returns the exit status."""
    try:
        if args.workers < 1:
            raise _UserError(f"--workers must be at least 1, got {args.workers}")
        if args.seeds < 1:
            raise _UserError(f"--seeds must be at least 1, got {args.seeds}")
        if args.seed_root is not None and not 0 <= args.seed_root < se.SEED_SPACE:
            raise _UserError(f"--seed-root must be in [0, 2**31), got {args.seed_root}")
        if args.max_turns < 1:
            raise _UserError(f"--max-turns must be at least 1, got {args.max_turns}")
        out = Path(args.out) if args.out else None
        if out is not None and not out.parent.is_dir():
            raise _UserError(
                f"--out {args.out}: directory {out.parent} does not exist; create it first"
            )
        if out is not None and out.is_dir():
            raise _UserError(f"--out {args.out} is a directory; name a file such as report.json")
        items, skills = _read_items(args.paths, args.hint, args.max_turns)
    except _UserError as exc:
        print(f"spade-corpus validate: error: {exc}", file=sys.stderr)
        return 2
    root = se.fresh_root() if args.seed_root is None else args.seed_root
    seeds = se.draw_seeds(root, args.seeds)
    print(f"seeds drawn from root {root} (reproduce with --seed-root {root}): {list(seeds)}")
    start = time.perf_counter()
    reports = validate_many(items, workers=args.workers, progress=not args.no_progress, seeds=seeds)
    summary = validation_summary(reports, skills, time.perf_counter() - start)
    for rep in reports:
        if not rep.valid:
            kind = "INFRASTRUCTURE" if rep.infrastructure else "INVALID"
            print(f"{rep.env_id}: {kind} [{rep.reason}] {rep.message}")
            if rep.evidence:
                ev = rep.evidence
                print(
                    f"  evidence: probe={ev['probe']} seed={ev['seed']} excerpt={ev['excerpt']!r}"
                )
    if out is not None:
        data = {"summary": summary, "seed_root": root, "reports": [r.to_dict() for r in reports]}
        se.atomic_write_text(out, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(
        f"{summary['valid']}/{summary['total']} valid, {summary['invalid']} invalid, "
        f"{summary['infrastructure_errors']} infrastructure errors, in {summary['elapsed_s']:.1f} s"
        + (f"; report: {out}" if out is not None else "")
    )
    return 0 if summary["valid"] == summary["total"] else 1
