"""How many environments the validator judges right: the adversarial suite (each file's
``# expect:`` reason family) or shipped corpora (all valid), on 5 seeds drawn from a root.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/suite_score.py ROOT suite
    uv run --package spade-corpus python packages/spade-corpus/benchmarks/suite_score.py ROOT example,starter,tool_use

Prints one ``MISS`` line per wrong verdict and a summary line (right / total, envs/s).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import spade_envs as se
from spade_corpus import ValidationItem, validate_many
from spade_corpus.validate import corpus_items

SUITE = Path(__file__).resolve().parents[1] / "tests" / "adversarial"
_HEADER = re.compile(r"^# (expect|family|hint): (.*)$", re.M)


def suite_items() -> tuple[list[ValidationItem], dict[str, str]]:
    items, expected = [], {}
    for path in sorted(SUITE.glob("*/*.py")):
        head = dict(_HEADER.findall(path.read_text()[:600]))
        case = f"{path.parent.name}/{path.stem}"
        items.append(ValidationItem(path.read_text(), head["hint"], case))
        expected[case] = head["expect"]
    return items, expected


def corpora_items(names: str) -> tuple[list[ValidationItem], dict[str, str]]:
    items = [i for name in names.split(",") for i in corpus_items(se.load_corpus(name))]
    return items, {i.env_id: "valid" for i in items}


def main(argv: list[str]) -> int:
    root = int(argv[0]) if argv else 1234
    which = argv[1] if len(argv) > 1 else "suite"
    seeds = se.draw_seeds(root, 5)
    items, expected = suite_items() if which == "suite" else corpora_items(which)
    start = time.perf_counter()
    reports = validate_many(items, workers=2, progress=False, seeds=seeds)
    elapsed = time.perf_counter() - start
    right = 0
    for r in reports:
        got = "valid" if r.valid else (r.reason or "").split(":")[0]
        right += got == expected[r.env_id]
        if got != expected[r.env_id]:
            message = (r.message or "")[:150]
            print(f"MISS {r.env_id}: expect {expected[r.env_id]} got {r.reason}: {message}")
    rate = len(reports) / elapsed
    print(
        f"root {root} seeds {seeds}: {right}/{len(reports)} right, {rate:.2f} envs/s, {elapsed:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
