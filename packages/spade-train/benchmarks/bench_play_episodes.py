"""Play-stage episodes/s at concurrency 64, zero-latency policy: in-process against sandboxed
with and without worker reuse, alternating in each round.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_play_episodes.py [--rounds 3] [--batches 4]

The play stage as ``bench_rollout.py`` drives it (``run_episodes(concurrency=64, workers=8)``,
a ``PolicyAgent`` over a fake backend that answers at once, ``episode_samples`` per episode) on
the example corpus's ``math_balance_weights`` (6 turns). Per round, each path plays
``--batches`` batches of 64 episodes; its figure is the median batch's episodes/s. Paths:

- ``in-process``: ``load_env`` (the baseline), and ``in-process, no threads`` (``workers=1``,
  which is faster in-process: the last line gives the ratio against the better of the two);
- ``sandboxed, fresh``: ``SandboxedFactory(reuse_workers=False)`` on a warm ``SandboxPool``
  (2 spares, as the loop's): a new worker per episode, as before worker reuse;
- ``sandboxed, reuse``: ``SandboxedFactory()`` (reuse on), a factory made for the round: its
  first batch opens the 64 workers (shown alone as ``first batch``: what a play step sees when
  an environment has no more episodes than run at once) and the later batches reuse them
  (the ``sandboxed, reuse`` figure).

The table gives per path the median over rounds, the range, and the ratio against in-process.
Goal (issue 23): sandboxed episodes >= 0.5x in-process at concurrency 64.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import spade_envs as se
import spade_sandbox as ss

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import LatencyBackend, play_batch  # noqa: E402

CONCURRENCY = 64
ACTION = "Three items at a time; start with A, B and C. \\boxed{weigh ABC}"


def batch_rate(factory, record, backend, seed: int, workers: int = 8) -> float:
    start = time.perf_counter()
    play_batch(factory, record, CONCURRENCY, 6, backend, seed=seed, workers=workers)
    return CONCURRENCY / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--batches", type=int, default=4, help="batches of 64 per path and round (at least 2)"
    )
    args = parser.parse_args(argv)
    corpus = se.load_corpus("example", verify=False)
    record = next(r for r in corpus.records if r.id == "math_balance_weights")
    source = corpus.source(record.id)
    backend = LatencyBackend(0.0, ACTION)
    config = ss.SandboxConfig(backend="process", limits=ss.Limits(call_wall_s=10.0))
    rates: dict[str, list[float]] = {}
    inside = se.load_env(source, record.class_name, origin=record.id)
    with ss.SandboxPool(config, size=2) as pool:
        batch_rate(inside, record, backend, 0)  # warm-up
        for r in range(args.rounds):
            fresh = se.SandboxedFactory(source, record.class_name, pool=pool, reuse_workers=False)
            reusing = se.SandboxedFactory(source, record.class_name, pool=pool)
            runs: dict[str, list[float]] = {
                "in-process": [], "in-process, no threads": [], "sandboxed, fresh": [],
                "sandboxed, reuse": [],
            }  # fmt: skip
            for b in range(args.batches):
                seed = 1000 * (r * args.batches + b)
                for name, factory in (("in-process", inside), ("sandboxed, fresh", fresh),
                                      ("sandboxed, reuse", reusing)):  # fmt: skip
                    pool.wait_ready(60)
                    runs[name].append(batch_rate(factory, record, backend, seed))
                runs["in-process, no threads"].append(batch_rate(inside, record, backend, seed, 1))
            first = runs["sandboxed, reuse"].pop(0)  # it opened the workers the others reuse
            for name, values in runs.items():
                rates.setdefault(name, []).append(statistics.median(values))
            rates.setdefault("sandboxed, reuse: first batch", []).append(first)
            reusing.close()
    base = statistics.median(rates["in-process"])
    print(
        f"python {sys.version.split()[0]}; {record.id}, 6 turns, concurrency {CONCURRENCY}, "
        f"zero-latency policy; {args.rounds} rounds x {args.batches} batches"
    )
    print(f"{'':<32} {'episodes/s':>11} {'range':>13} {'vs in-process':>14}")
    for name, values in rates.items():
        mid = statistics.median(values)
        span = f"{min(values):,.0f}-{max(values):,.0f}"
        print(f"{name:<32} {mid:>11,.0f} {span:>13} {mid / base:>13.2f}x")
    reuse = statistics.median(rates["sandboxed, reuse"])
    ratio = reuse / base
    print(f"goal: sandboxed (reuse) >= 0.5x in-process -> {'met' if ratio >= 0.5 else 'NOT met'}")
    best = max(base, statistics.median(rates["in-process, no threads"]))
    print(f"against in-process at its best setting: {reuse / best:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
