"""Sandbox requests per validation: how many round trips ``validate_many`` makes on the 60
example games, by op, with the batched checks and step by step, and the time of each.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/bench_requests.py [--workers 2]

Requests are counted where the host writes them (``spade_sandbox.FramedWorker.send``), so the
count does not depend on the machine's load. "step by step" switches the checker's batched
play off (``spade_envs.play._batched``) in the same process; the reports must be the same.
On a checkout without batching it counts what that checkout does.
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

import spade_envs as se
import spade_sandbox as ss
from spade_corpus.validate import ValidationItem, validate_many

try:
    from spade_envs import play as _play
except ImportError:  # pragma: no cover - an older checkout
    _play = None  # type: ignore[assignment]


def _items() -> list[ValidationItem]:
    corpus = se.load_corpus("example")
    return [
        ValidationItem(
            corpus.sources[r.id], r.hint, r.id, r.skill, r.max_turns or se.DEFAULT_MAX_TURNS
        )
        for r in corpus.records
    ]


def _counted(run: Any) -> tuple[collections.Counter[str], float, list[Any]]:
    counts: collections.Counter[str] = collections.Counter()
    send = ss.FramedWorker.send

    def counting(self: Any, message: dict, timeout_s: float) -> Any:
        counts[str(message.get("op"))] += 1
        return send(self, message, timeout_s)

    ss.FramedWorker.send = counting  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        reports = run()
        return counts, time.perf_counter() - start, reports
    finally:
        ss.FramedWorker.send = send  # type: ignore[method-assign]


def _rows(reports: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        row = report.to_dict()
        row.pop("wall_s", None)
        row["checks"] = {k: v for k, v in row["checks"].items() if not k.endswith("_s")}
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    items = _items()
    batched = getattr(_play, "_batched", None)
    modes = (
        [("batched", batched), ("step by step", lambda env: None)] if batched else [("as is", None)]
    )
    results = {}
    with ss.SandboxPool(ss.SandboxConfig.from_env(), size=args.workers) as pool:
        pool.wait_ready()
        validate_many(items[:4], workers=args.workers, progress=False, pool=pool)  # warm
        for name, switch in modes:
            if switch is not None:
                _play._batched = switch  # type: ignore[union-attr]
            try:
                results[name] = _counted(
                    lambda: validate_many(items, workers=args.workers, progress=False, pool=pool)
                )
            finally:
                if batched is not None:
                    _play._batched = batched  # type: ignore[union-attr]
    reports = [_rows(r) for _, _, r in results.values()]
    same = all(r == reports[0] for r in reports)
    print(f"{len(items)} validations (example corpus), {args.workers} workers")
    for name, (counts, seconds, _) in results.items():
        ops = ", ".join(f"{op} {n:,}" for op, n in counts.most_common())
        print(f"{name:13s}: {sum(counts.values()):7,} requests  {seconds:6.2f} s  ({ops})")
    print(f"reports {'identical' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
