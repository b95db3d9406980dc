"""A validator batch with hostile environments in it completes with one report line each.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/bench_hostile_batch.py [--n 1000] [--workers 2]

The batch (issue 40's "bad input" bar): ``--n`` environments, 10 % of them the sandbox
attacks of ``tests/bad_envs/sandbox_*.py`` (memory, time, disk, output, crashes, forbidden
imports and syscalls, protocol errors), the rest the adversarial suite's files and the example
corpus's games, repeated in a fixed shuffled order, through one ``validate_many`` call on one
warm pool. Prints one line per environment to ``--lines`` (when given), then envs/s and the
count of each reason; exits non-zero unless every item got exactly one report.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import re
import time
from pathlib import Path

import spade_envs as se
import spade_sandbox as ss
from spade_corpus.validate import ValidationItem, validate_many

TESTS = Path(__file__).resolve().parents[1] / "tests"
_HINT = re.compile(r"^# hint: (.+)$", re.MULTILINE)
_HOSTILE_HINT = "Binary search: guess the midpoint of the numbers still possible."


def hostile_items() -> list[ValidationItem]:
    """The sandbox attacks, each with the hint of the game they are built on."""
    return [
        ValidationItem(p.read_text(), _HOSTILE_HINT, f"hostile/{p.stem}")
        for p in sorted(TESTS.glob("bad_envs/sandbox_*.py"))
    ]


def ordinary_items() -> list[ValidationItem]:
    """The adversarial suite's hacks and honest games, and the example corpus's games."""
    items = []
    for path in sorted(TESTS.glob("adversarial/*/*.py")):
        hint = _HINT.search(path.read_text())
        items.append(
            ValidationItem(
                path.read_text(), hint.group(1) if hint else "", f"{path.parent.name}/{path.stem}"
            )
        )
    corpus = se.load_corpus("example")
    for r in corpus.records:
        items.append(
            ValidationItem(
                corpus.sources[r.id], r.hint, r.id, r.skill, r.max_turns or se.DEFAULT_MAX_TURNS
            )
        )
    return items


def batch(n: int, seed: int = 0) -> list[ValidationItem]:
    """``n`` items, a tenth hostile, in a shuffled order fixed by ``seed``."""
    hostile, ordinary = hostile_items(), ordinary_items()
    n_hostile = n // 10
    items = [hostile[i % len(hostile)] for i in range(n_hostile)]
    items += [ordinary[i % len(ordinary)] for i in range(n - n_hostile)]
    random.Random(seed).shuffle(items)
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="environments in the batch")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lines", type=Path, help="write one report line per environment here")
    args = parser.parse_args()
    items = batch(args.n)
    limits = ss.Limits(call_wall_s=1.0, cpu_s=8, mem_mib=256, max_disk_files=200)
    config = dataclasses.replace(ss.SandboxConfig.from_env(), limits=limits)
    start = time.perf_counter()
    reports = validate_many(items, workers=args.workers, progress=False, config=config)
    seconds = time.perf_counter() - start
    lines = [
        f"{item.env_id}\t{'valid' if r.valid else r.reason}"
        for item, r in zip(items, reports, strict=True)
    ]
    if args.lines:
        args.lines.write_text("\n".join(lines) + "\n")
    reasons = collections.Counter(
        "valid" if r.valid else str(r.reason).split(":")[0] for r in reports
    )
    hostile = collections.Counter(
        "valid" if r.valid else str(r.reason)
        for item, r in zip(items, reports, strict=True)
        if str(item.env_id).startswith("hostile/")
    )
    print(
        f"{len(items)} environments ({sum(hostile.values())} hostile), {args.workers} workers: {seconds:.1f} s, {len(items) / seconds:.2f} envs/s"
    )
    print(f"report lines: {len(lines)} (one per environment: {len(lines) == len(items)})")
    for reason, count in reasons.most_common():
        print(f"  {reason:28s} {count}")
    print("hostile items by reason:", dict(hostile.most_common()))
    if len(reports) != len(items):
        raise SystemExit("a report is missing")


if __name__ == "__main__":
    main()
