"""Rollout throughput: episodes/s of the play stage as the number of concurrent episodes grows.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_rollout.py [--latency-ms 20] [--max 64]

The play stage as ``SelfPlay.play`` runs it: ``EpisodeSpec``s (hinted and unhinted in turn)
over one environment of the shipped example corpus (``--env``), played by
``spade_envs.run_episodes`` with a ``spade_train.play.PolicyAgent``, then every episode turned
into training samples by ``episode_samples``. The runner plays in lockstep: each round makes ONE
batched ``backend.generate`` call for all live episodes, so "concurrency" is the number of
episodes in flight (``run_episodes(concurrency=c)``, the loop's ``agent.concurrency``), and
``--workers`` threads start, step and close the round's environments (``agent.env_workers``,
default 8 as in the loop). The policy is a fake backend
whose ``generate`` takes ``--latency-ms`` per call, whatever the batch size (a batched GPU
generation costs about the same for 1 or 64 chats), and replies with a fixed well-formed
action (``--action``), so every episode lasts the same number of turns.

Two paths, measured in the same run:

- ``sandboxed`` (what the loop uses): a ``spade_envs.SandboxedFactory`` on a
  ``spade_sandbox.SandboxPool`` of ``--pool-size`` warm workers (the loop's pool has
  ``validation.workers`` = 2), process backend, ``call_wall_s`` 10 (``validation.timeout_s``);
  the factory keeps each closed environment's worker and the next episode reuses it (the first
  batch of a level opens the workers, later ones reuse them); the pool is refilled before each
  batch;
- ``sandboxed-fresh`` (``--paths sandboxed-fresh``): the same with ``reuse_workers=False``, a
  new worker per episode, as before worker reuse;
- ``in-process``: ``spade_envs.load_env`` (trusted code in this interpreter), to show the
  runner's own scaling without the sandbox's per-episode and per-step costs.

Per level, ``--episodes`` episodes (at least 3 batches) are played as successive batches of
``c`` episodes; the figure is the median batch's episodes/s. Speedup is against concurrency 1
of the same path in this run; ideal is linear (``c``). ``policy %`` is the share of the batch
time spent in the fake policy (rounds x latency): the rest is the runner, the environment
(and sandbox) and sample building (``episode_samples``).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from collections.abc import Sequence

import spade_envs as se
import spade_sandbox as ss
from spade_train.play import PolicyAgent, episode_samples
from spade_train.types import Generation, SamplingParams

_PIECE = re.compile(r"\s+|\S+")
GOAL_EFFICIENCY = 0.8  # "near-linear": speedup at least 80 % of ideal


class LatencyBackend:
    """A fake policy backend: each ``generate`` call takes ``latency_s`` in all (rendering the
    chats, then sleeping the rest) and answers every chat with ``reply``. Tokens are the whitespace/non-whitespace pieces of a ChatML rendering (about
    a BPE token's length), so consecutive turns merge into one training sequence as they do
    with a real chat template."""

    name = "latency"

    def __init__(self, latency_s: float, reply: str):
        self.latency_s = latency_s
        self.reply = reply
        self.vocab: dict[str, int] = {}
        self.completion = self._ids(reply + "<|im_end|>\n")
        self.calls = 0

    def _ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(piece, len(self.vocab)) for piece in _PIECE.findall(text)]

    def _render(self, messages: Sequence[dict[str, str]]) -> list[int]:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return self._ids(text + "<|im_start|>assistant\n")

    def generate(self, conversations, params: SamplingParams, tools=None) -> list[Generation]:
        start = time.perf_counter()
        self.calls += 1
        out = [
            Generation(self.reply, self._render(m), self.completion, [-0.5] * len(self.completion))
            for m in conversations
        ]
        time.sleep(max(0.0, self.latency_s - (time.perf_counter() - start)))
        return out

    def train_step(self, samples):
        raise NotImplementedError

    def save(self, path) -> None: ...

    def load(self, path) -> None: ...

    def publish_weights(self) -> None: ...

    def close(self) -> None: ...


def play_batch(
    factory, record, concurrency: int, max_turns: int, backend, seed: int, workers: int = 1
) -> tuple[int, int]:
    """One ``run_episodes`` call of ``concurrency`` episodes as ``SelfPlay.play`` makes it;
    returns (turns played, samples built)."""
    specs = [
        se.EpisodeSpec(factory, seed=seed + i // 2, hint=record.hint if i % 2 else None,
                       env_id=record.id, max_turns=max_turns)
        for i in range(concurrency)
    ]  # fmt: skip
    agent = PolicyAgent(backend, lambda call: SamplingParams(max_new_tokens=64, seed=seed + call))
    results = se.run_episodes(specs, agent, concurrency=concurrency, workers=workers)
    samples = [
        episode_samples(agent, r, 0.0, {"env_id": r.env_id, "hinted": r.hinted}) for r in results
    ]
    errors = [r.error for r in results if r.error is not None]
    assert not errors, errors[0]
    return sum(len(r.turns) for r in results), sum(len(s) for s in samples)


def measure(name, factory, record, levels, args, backend, before_batch) -> list[dict]:
    rows = []
    for c in levels:
        batches = max(3, math.ceil(args.episodes / c))
        times, turns, calls = [], 0, 0
        for b in range(batches):
            before_batch()
            calls_before = backend.calls
            start = time.perf_counter()
            played, n_samples = play_batch(
                factory, record, c, args.max_turns, backend, seed=1000 * b, workers=args.workers
            )
            times.append(time.perf_counter() - start)
            assert n_samples == c, f"{n_samples} samples for {c} episodes: turns did not merge"
            turns, calls = played, backend.calls - calls_before
        median = statistics.median(times)
        rows.append({"path": name, "c": c, "episodes": batches * c, "turns": turns / c, "calls": calls,
                     "batch_s": median, "eps": c / median, "policy": calls * args.latency_ms / 1000 / median})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--latency-ms", type=float, default=20.0, help="per generate call (default %(default)s)"
    )
    parser.add_argument(
        "--max",
        type=int,
        default=64,
        help="highest concurrency, doubling from 1 (default %(default)s)",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=64,
        help="episodes per level, at least 3 batches (default %(default)s)",
    )
    parser.add_argument(
        "--env",
        default="math_balance_weights",
        help="example-corpus environment id (default %(default)s)",
    )
    parser.add_argument(
        "--action",
        default="Three items at a time; start with A, B and C. \\boxed{weigh ABC}",
        help="the fixed reply (starting with a non-space character)",
    )
    parser.add_argument(
        "--max-turns", type=int, default=6, help="agent.max_turns (default %(default)s)"
    )
    parser.add_argument(
        "--pool-size", type=int, default=2, help="warm sandbox workers (default %(default)s)"
    )
    parser.add_argument(
        "--workers", type=int, default=8,
        help="threads for the environments' start/step/close (agent.env_workers; default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--paths", default="sandboxed,in-process", help="comma-separated (default %(default)s)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 if a path's speedup at --max is under {GOAL_EFFICIENCY:.0%} of linear",
    )
    args = parser.parse_args(argv)

    # Only the environment played is checked against its checksum, so edits to other games of
    # the corpus do not stop the benchmark.
    corpus = se.load_corpus("example", verify=False)
    record = next((r for r in corpus.records if r.id == args.env), None)
    if record is None:
        parser.error(
            f"--env {args.env!r} is not in the example corpus; ids: {', '.join(r.id for r in corpus.records)}"
        )
    source = corpus.source(record.id)
    if se.sha256_text(source) != record.sha256:
        parser.error(f"{record.id}: its source does not match the manifest's sha256")
    levels = [2**k for k in range(int(math.log2(args.max)) + 1)]
    backend = LatencyBackend(args.latency_ms / 1000, args.action)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]

    rows = []
    for path in paths:
        if path in ("sandboxed", "sandboxed-fresh"):
            config = ss.SandboxConfig(backend="process", limits=ss.Limits(call_wall_s=10.0))
            with ss.SandboxPool(config, size=args.pool_size) as pool:
                factory = se.SandboxedFactory(
                    source,
                    record.class_name,
                    pool=pool,
                    origin=record.id,
                    reuse_workers=path == "sandboxed",
                )
                rows += measure(
                    path,
                    factory,
                    record,
                    levels,
                    args,
                    backend,
                    lambda pool=pool: pool.wait_ready(60),
                )
        elif path == "in-process":
            factory = se.load_env(source, record.class_name, origin=record.id)
            rows += measure(path, factory, record, levels, args, backend, lambda: None)
        else:
            parser.error(f"unknown path {path!r}; use sandboxed, sandboxed-fresh, in-process")

    print(
        f"python {sys.version.split()[0]}, spade-envs {se.__version__}; env {record.id}, reply {args.action!r}, "
        f"max_turns {args.max_turns}, fake policy {args.latency_ms:.0f} ms per batched generate call, "
        f"{args.workers} environment threads, {args.pool_size} warm sandbox workers"
    )
    print(
        f"{'path':<11} {'conc.':>5} {'episodes':>8} {'turns/ep':>8} {'calls':>5} {'batch s':>8} "
        f"{'episodes/s':>10} {'speedup':>8} {'ideal':>6} {'eff.':>5} {'policy %':>8}"
    )
    short = False
    for path in paths:
        mine = [r for r in rows if r["path"] == path]
        base = mine[0]["eps"]
        for r in mine:
            speedup = r["eps"] / base
            print(
                f"{path:<11} {r['c']:>5} {r['episodes']:>8} {r['turns']:>8.1f} {r['calls']:>5} {r['batch_s']:>8.3f} "
                f"{r['eps']:>10.1f} {speedup:>7.1f}x {r['c']:>5}x {speedup / r['c']:>5.0%} {r['policy']:>8.0%}"
            )
        last = mine[-1]
        short |= last["eps"] / base < GOAL_EFFICIENCY * last["c"]
    print(
        f"goal: speedup at {levels[-1]} at least {GOAL_EFFICIENCY:.0%} of linear on every path -> "
        f"{'SHORT' if short else 'met'}"
    )
    return 1 if short and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
