"""Chat-runner overhead: ``run_episodes`` against calling the raw ``step`` in a loop.

    uv run --package spade-envs python packages/spade-envs/benchmarks/bench_runner.py [--episodes N] [--repeats R] [--check]

Both sides play the same game, seeds and actions: a scripted agent replies with the precomputed
action of its turn (``\\boxed{n}``), which the runner parses, steps, records and appends to the
chat; the baseline constructs the environment, resets it and steps the same actions itself. The
difference per turn is what the runner costs on top of the environment. The runner is measured
two ways: one episode at a time (``run_episode``) and all episodes in lockstep
(``run_episodes``, one batched agent call per round, as training uses it). Each figure is the
best of ``--repeats`` runs. ``--check`` exits 1 when an overhead is over the 50 µs goal;
``--profile`` prints where the lockstep runner's time goes (cProfile, by own time).
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from collections.abc import Callable

import spade_envs as se

GOAL_US = 50.0
TURNS = 40

# A cheap game, so the environment does not hide the runner's cost: close in on a hidden number
# in 1..1000 from "higher"/"lower" answers, at most TURNS turns.
GAME_SOURCE = r"""
import random
import re

_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


class HiddenNumberEnv:
    skill = "Math"

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.secret = self.rng.randint(1, 1000)
        self.turn = 0
        self.done = False
        return f"Find my number in 1..1000 within {self.max_turns} turns; answer \\boxed{{n}}.", {}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        found = _BOXED.findall(action)
        if not found:
            obs, reward, term = "Write \\boxed{n}.", 0.0, False
        elif int(found[-1]) == self.secret:
            obs, reward, term = "Correct!", 1.0, True
        else:
            obs, reward, term = ("Higher." if int(found[-1]) < self.secret else "Lower."), 0.0, False
        trunc = not term and self.turn >= self.max_turns
        self.done = term or trunc
        return obs, reward, term, trunc, {"turn": self.turn}

    def solution(self):
        return f"\\boxed{{{self.secret}}}"

    def close(self):
        pass
"""


def episode_actions(factory: se.EnvFactory, seed: int) -> list[str]:
    """TURNS - 1 wrong guesses, then the answer: every episode lasts exactly TURNS turns."""
    env = factory(max_turns=TURNS)
    env.reset(seed=seed)
    secret = int(re.search(r"\d+", env.solution()).group())
    wrong = [g for g in range(1, 1001) if g != secret][seed % 500 :][: TURNS - 1]
    return [f"\\boxed{{{g}}}" for g in wrong] + [f"\\boxed{{{secret}}}"]


def raw_loop(factory: se.EnvFactory, seeds: list[int], actions: dict[int, list[str]]) -> int:
    turns = 0
    for seed in seeds:
        env = factory(max_turns=TURNS)
        env.reset(seed=seed)
        for action in actions[seed]:
            _, _, terminated, truncated, _ = env.step(action)
            turns += 1
            if terminated or truncated:
                break
        env.close()
    return turns


class ScriptedAgent:
    """Replies with the precomputed action of the current turn (the system prompt is off),
    after ``preamble`` (reasoning text the runner has to parse past)."""

    def __init__(self, actions: list[str], preamble: str = ""):
        self.replies = [preamble + a for a in actions]

    def __call__(self, messages: list[se.Message]) -> str:
        return self.replies[len(messages) // 2]


# What a model writes before its answer: ~2,000 characters of prose with braces and numbers.
REASONING = (
    "The last answer was lower, so the number is in {low, ..., high}; halving the range "
    "again leaves about 2^k candidates after k more turns. "
) * 14


def runner_one_by_one(factory, seeds, actions) -> int:
    turns = 0
    for seed in seeds:
        spec = se.EpisodeSpec(factory, seed=seed, max_turns=TURNS)
        result = se.run_episode(spec, ScriptedAgent(actions[seed]), system_prompt=None)
        assert result.won and result.error is None, result.error
        turns += len(result.turns)
    return turns


def runner_lockstep(factory, seeds, actions, preamble: str = "") -> int:
    specs = [se.EpisodeSpec(factory, seed=s, max_turns=TURNS) for s in seeds]
    agents = [ScriptedAgent(actions[s], preamble) for s in seeds]

    def batch(chats: list[list[se.Message]]) -> list[str]:
        # Every episode lasts TURNS turns, so all are live each round, in spec order.
        return [agent(chat) for agent, chat in zip(agents, chats, strict=True)]

    results = se.run_episodes(specs, batch, system_prompt=None)
    assert all(r.won and r.error is None for r in results)
    return sum(len(r.turns) for r in results)


def best_of(repeats: int, fn: Callable[[], int]) -> tuple[float, int]:
    """Best wall time over ``repeats`` runs (garbage collection paused while timing)."""
    times, turns = [], 0
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            turns = fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times), turns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if an overhead is over {GOAL_US:.0f} µs"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of the lockstep runner"
    )
    args = parser.parse_args(argv)

    factory = se.load_env(GAME_SOURCE)
    seeds = list(range(args.episodes))
    actions = {s: episode_actions(factory, s) for s in seeds}

    raw_s, raw_turns = best_of(args.repeats, lambda: raw_loop(factory, seeds, actions))
    rows = [("raw step loop (baseline)", raw_s, raw_turns)]
    variants = (
        ("run_episode, one at a time", runner_one_by_one),
        ("run_episodes, lockstep batch", runner_lockstep),
        (
            f"lockstep, {len(REASONING):,}-char replies",
            lambda *a: runner_lockstep(*a, preamble=REASONING),
        ),
    )
    for name, fn in variants:
        seconds, turns = best_of(args.repeats, lambda fn=fn: fn(factory, seeds, actions))
        assert turns == raw_turns, (name, turns, raw_turns)
        rows.append((name, seconds, turns))

    print(
        f"python {sys.version.split()[0]}, spade-envs {se.__version__}; {args.episodes} episodes x {TURNS} turns, "
        f"best of {args.repeats}"
    )
    print(f"{'':<30} {'steps/s':>10} {'µs/turn':>9} {'time/raw':>9} {'overhead µs/turn':>17}")
    over = False
    raw_us = raw_s / raw_turns * 1e6
    for name, seconds, turns in rows:
        per_turn_us = seconds / turns * 1e6
        overhead = per_turn_us - raw_us
        baseline = name.startswith("raw")
        over |= not baseline and overhead > GOAL_US
        print(
            f"{name:<30} {turns / seconds:>10,.0f} {per_turn_us:>9.2f} {seconds / raw_s:>8.2f}x "
            f"{'' if baseline else f'{overhead:.2f}':>17}"
        )
    print(f"goal: overhead under {GOAL_US:.0f} µs per turn -> {'OVER' if over else 'met'}")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(runner_lockstep, factory, seeds, actions)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return 1 if over and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
