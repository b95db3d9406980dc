"""Episodes per second: in-process against sandboxed, with and without worker reuse.

    uv run --package spade-envs python packages/spade-envs/benchmarks/bench_episodes.py [--rounds R] [--episodes N] [--envs K]

Every variant plays the same ``N`` episodes (``K`` environments with the same short game,
``N / K`` seeds each, ``TURNS`` steps per episode) through the lockstep runner
(``run_episodes``, ``concurrency=64``, ``workers=8`` as the play step calls it) with a
zero-latency agent (a constant reply), so the environments' own cost is all that is timed:

- **in-process**: ``load_env(source)``; run with ``workers=1`` and ``workers=8`` and the faster
  of the two is the baseline;
- **sandboxed, no reuse**: a ``SandboxedFactory`` on a warm ``SandboxPool`` with
  ``reuse_workers=False``: a new worker per episode, as before worker reuse;
- **sandboxed, reuse (cold)**: ``reuse_workers=True`` on new factories, so the first episodes
  of each environment still open their workers (the play step builds its factories per cycle);
- **sandboxed, reuse (warm)**: the same factories again, their workers kept from the cold run.

Variants alternate within each of ``--rounds`` rounds (so machine load hits them alike); the
table gives the median and range of episodes/s over the rounds and each median's ratio against
the in-process baseline's. Goal (issue 23): sandboxed episodes >= 0.5x in-process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import spade_envs as se
import spade_sandbox as ss

TURNS = 4
CONCURRENCY = 64
WORKERS = 8

GAME_SOURCE = r"""
import random
import re

_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


class HiddenNumberEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.secret = self.rng.randint(1, 1000)
        self.turn = 0
        return f"Find my number in 1..1000 within {self.max_turns} turns; answer \\boxed{{n}}.", {}

    def step(self, action):
        self.turn += 1
        found = _BOXED.findall(action)
        if not found:
            return "Write \\boxed{n}.", 0.0, False, self.turn >= self.max_turns, {}
        guess = int(found[-1])
        if guess == self.secret:
            return "Correct!", 1.0, True, False, {"turn": self.turn}
        hint = "Higher." if guess < self.secret else "Lower."
        return hint, 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}
"""


REPLY = "\\boxed{0}"


def zero_latency_agent(chats: list[list[se.Message]]) -> list[str]:
    """A constant reply (by default a wrong guess): every episode lasts exactly TURNS steps."""
    return [REPLY] * len(chats)


def play(factories: list, episodes: int, workers: int) -> float:
    """Episodes per second of one run over ``factories`` (seeds spread evenly)."""
    per_env = episodes // len(factories)
    specs = [
        se.EpisodeSpec(f, seed=s, env_id=f"env{k}", max_turns=TURNS)
        for k, f in enumerate(factories)
        for s in range(per_env)
    ]
    started = time.perf_counter()
    results = se.run_episodes(
        specs, zero_latency_agent, system_prompt=None, concurrency=CONCURRENCY, workers=workers
    )
    took = time.perf_counter() - started
    bad = [r.error for r in results if r.error is not None or len(r.turns) != TURNS]
    assert not bad, bad[:3]
    return len(results) / took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=640)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--pool-size", type=int, default=2, help="warm spares of the pool")
    parser.add_argument(
        "--env", default="", help="an example-corpus environment instead of the built-in game"
    )
    parser.add_argument(
        "--action", default="\\boxed{0}", help="the agent's constant reply (default %(default)s)"
    )
    args = parser.parse_args(argv)
    source, class_name = GAME_SOURCE, None
    if args.env:
        corpus = se.load_corpus("example")
        record = next(r for r in corpus.records if r.id == args.env)
        source, class_name = corpus.source(record.id), record.class_name
    global REPLY
    REPLY = args.action

    config = ss.SandboxConfig.from_env()
    rates: dict[str, list[float]] = {}

    def record(name: str, rate: float) -> None:
        rates.setdefault(name, []).append(rate)

    with ss.SandboxPool(config, size=args.pool_size) as pool:
        pool.wait_ready()
        inside = [se.load_env(source, class_name) for _ in range(args.envs)]
        play(inside, args.episodes, 1)  # warm-up: imports, caches
        for _ in range(args.rounds):
            record("in-process, workers=1", play(inside, args.episodes, 1))
            record(f"in-process, workers={WORKERS}", play(inside, args.episodes, WORKERS))
            fresh = [
                se.SandboxedFactory(source, class_name, pool=pool, reuse_workers=False)
                for _ in range(args.envs)
            ]
            record("sandboxed, no reuse", play(fresh, args.episodes, WORKERS))
            reusing = [se.SandboxedFactory(source, class_name, pool=pool) for _ in range(args.envs)]
            record("sandboxed, reuse (cold)", play(reusing, args.episodes, WORKERS))
            record("sandboxed, reuse (warm)", play(reusing, args.episodes, WORKERS))
            for factory in reusing:
                factory.close()
            pool.wait_ready()

    base_name = max(
        (n for n in rates if n.startswith("in-process")), key=lambda n: statistics.median(rates[n])
    )
    base = statistics.median(rates[base_name])
    print(
        f"python {sys.version.split()[0]}; {args.episodes} episodes ({args.envs} environments) x "
        f"{TURNS} steps, concurrency {CONCURRENCY}, zero-latency agent; {args.rounds} rounds; "
        f"baseline: {base_name}"
    )
    print(f"{'':<26} {'episodes/s (median)':>20} {'range':>17} {'vs in-process':>14}")
    for name, values in rates.items():
        mid = statistics.median(values)
        span = f"{min(values):,.0f}-{max(values):,.0f}"
        print(f"{name:<26} {mid:>20,.0f} {span:>17} {mid / base:>13.3f}x")
    reuse = statistics.median(rates["sandboxed, reuse (warm)"]) / base
    print(
        f"goal: sandboxed (reuse, warm) >= 0.5x in-process -> {'met' if reuse >= 0.5 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
