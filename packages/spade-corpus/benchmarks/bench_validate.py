"""Validation throughput: the warm SandboxPool against one fresh sandboxed interpreter per env.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/bench_validate.py [--repeat N]

Validates the example corpus (the 60-game starter corpus) ``--repeat`` times through ``validate_many`` on a warm
pool (``--workers`` at once), and the same environments ``--workers`` at a time with no pool, so each
opens a fresh sandboxed interpreter (``spade_sandbox.open_env``). Both measured in this run;
prints envs/s, the ratio, and the time per pass over the corpus (goal: under 10 s).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import spade_envs as se
import spade_sandbox as ss
from spade_corpus.validate import ValidationItem, validate_many, validate_source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=1, help="passes over the corpus (default %(default)s)"
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    corpus = se.load_corpus("example")
    items = [
        ValidationItem(
            corpus.sources[r.id], r.hint, r.id, r.skill, r.max_turns or se.DEFAULT_MAX_TURNS
        )
        for r in corpus.records
    ] * args.repeat
    config = ss.SandboxConfig.from_env()

    with ss.SandboxPool(config, size=args.workers) as pool:
        pool.wait_ready()
        start = time.perf_counter()
        pooled = validate_many(items, workers=args.workers, progress=False, pool=pool)
        pooled_s = time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as executor:  # same parallelism, no pool
        fresh = list(executor.map(
            lambda i: validate_source(i.source, i.hint, skill=i.skill, max_turns=i.max_turns, config=config, env_id=i.env_id),
            items,
        ))  # fmt: skip
    fresh_s = time.perf_counter() - start

    assert all(r.valid for r in pooled + fresh), [r.message for r in pooled + fresh if not r.valid]
    n = len(items)
    print(f"{n} validations (example corpus x{args.repeat}), every one valid")
    print(f"warm pool, {args.workers} workers : {pooled_s:6.2f} s  {n / pooled_s:6.1f} envs/s")
    print(
        f"fresh interpreter per env, {args.workers} at once: {fresh_s:6.2f} s  {n / fresh_s:6.1f} envs/s"
    )
    print(f"ratio pool / fresh       : {fresh_s / pooled_s:6.2f}x")
    per_pass, fresh_pass = pooled_s / args.repeat, fresh_s / args.repeat
    print(
        f"one pass over the {len(corpus.records)} environments: {per_pass:6.2f} s on the pool"
        f" (goal < 10 s), {fresh_pass:.2f} s fresh"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
