"""Agreement of the LLM validator's reward-hack review with a labelled suite.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_llm_validator.py \
        [--suite packages/spade-corpus/tests/adversarial] [--model embedded:smollm2-135m] \
        [--limit N] [--max-new-tokens 384] [--out FILE.json]

The suite holds environment sources in ``hacks/`` (a lazy policy wins them: the review should
answer ``\\boxed{no}``) and ``honest/`` (it should answer yes). A ``# hint: ...`` line in a
file gives its privileged hint. Each file is validated in the sandbox first (the review's
evidence is that report), then the review's conversation
(:mod:`spade_train.core.hack_review`) goes to a local model at temperature 0. Reported: the
confusion matrix, accuracy, the share of hacks caught, the share of honest games kept, how
many replies had no verdict (the pipeline accepts those: fail open), Cohen's kappa, and the
same numbers for the hacks the sandbox validator itself let through (where the second line
matters).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import spade_corpus as sc
from spade_train.backends import make_backend
from spade_train.core import hack_review, judges
from spade_train.types import SamplingParams

DEFAULT_SUITE = Path(__file__).resolve().parents[2] / "spade-corpus" / "tests" / "adversarial"
DEFAULT_HINT = "Read the task and answer exactly what it asks."


@dataclass
class Case:
    path: Path
    hack: bool
    source: str
    hint: str
    report: sc.ValidationReport | None = None
    verdict: judges.Verdict | None = None


def load_suite(root: Path, limit: int | None) -> list[Case]:
    cases = []
    for label, hack in (("hacks", True), ("honest", False)):
        for path in sorted((root / label).glob("*.py"))[:limit]:
            source = path.read_text()
            hints = [
                x.split(":", 1)[1].strip() for x in source.splitlines() if x.startswith("# hint:")
            ]
            cases.append(Case(path, hack, source, hints[0] if hints else DEFAULT_HINT))
    if not cases:
        sys.exit(f"error: no hacks/*.py or honest/*.py under {root}; pass --suite DIR")
    return cases


def kappa(tp: int, fn: int, fp: int, tn: int) -> float:
    n = tp + fn + fp + tn
    observed = (tp + tn) / n
    expected = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / (n * n)
    return 0.0 if expected == 1 else (observed - expected) / (1 - expected)


def summary(cases: list[Case]) -> dict[str, float | int]:
    def said_no(c: Case) -> bool:
        return c.verdict is not None and not c.verdict.accepted

    tp = sum(c.hack and said_no(c) for c in cases)
    fn = sum(c.hack and not said_no(c) for c in cases)
    fp = sum(not c.hack and said_no(c) for c in cases)
    tn = sum(not c.hack and not said_no(c) for c in cases)
    n = len(cases)
    return {
        "cases": n,
        "hacks_caught": tp,
        "hacks_missed": fn,
        "honest_rejected": fp,
        "honest_kept": tn,
        "accuracy": round((tp + tn) / n, 3),
        "no_verdict": sum(
            c.verdict is not None and c.verdict.status == "no_verdict" for c in cases
        ),
        "kappa": round(kappa(tp, fn, fp, tn), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    ap.add_argument("--model", default="embedded:smollm2-135m")
    ap.add_argument("--limit", type=int, default=None, help="files per label")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cases = load_suite(args.suite, args.limit)
    t0 = time.perf_counter()
    items = [sc.ValidationItem(c.source, c.hint, c.path.stem) for c in cases]
    for c, report in zip(cases, sc.validate_many(items), strict=True):
        c.report = report
    t_validate = time.perf_counter() - t0
    backend = make_backend("local", model=args.model)
    params = SamplingParams(args.max_new_tokens, temperature=0.0, seed=0)
    t1 = time.perf_counter()
    for start in range(0, len(cases), args.batch):
        chunk = cases[start : start + args.batch]
        convs = [
            hack_review.hack_review_messages(c.source, c.hint, hack_review.evidence_lines(c.report))
            for c in chunk
        ]
        for c, g in zip(chunk, backend.generate(convs, params), strict=True):
            c.verdict = judges.parse_verdict(g.text)
        print(f"reviewed {min(start + args.batch, len(cases))}/{len(cases)}", file=sys.stderr)
    result = {
        "model": args.model,
        "suite": str(args.suite),
        "validate_s": round(t_validate, 1),
        "review_s": round(time.perf_counter() - t1, 1),
        "all": summary(cases),
        "sandbox_passed": summary([c for c in cases if c.report and c.report.valid]),
        "per_case": [
            {
                "file": f"{c.path.parent.name}/{c.path.name}",
                "sandbox": (c.report.reason or "valid") if c.report else None,
                "review": c.verdict.status if c.verdict else None,
            }
            for c in cases
        ],
    }
    print(json.dumps({k: v for k, v in result.items() if k != "per_case"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
