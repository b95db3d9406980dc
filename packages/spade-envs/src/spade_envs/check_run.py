"""The state of one :func:`spade_envs.check_env` run and how its checks start and replay
episodes: real resets, copies of kept resets (in the same sandbox call as the episode's first
steps where the environment batches) and replays of recorded actions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .core import EnvFactory, TextEnvironment
from .feasibility import Feasibility
from .play import (
    NotKept,
    Transcript,
    checked_reset,
    checked_reset_info,
    play_fixed,
    play_on,
    play_policy,
)
from .probes import Policy, ProbeTally, open_loop_actions

__all__ = ["CheckRun", "SeedPlay"]


@dataclass
class SeedPlay:
    seed: int
    first: str = ""
    first_info: dict = field(default_factory=dict)
    """The ``info`` of check_reset's reset."""
    probes: list[tuple[str, Transcript, bool]] = field(default_factory=list)
    solution_text: str | None = None
    solution_play: Transcript | None = None


@dataclass
class CheckRun:
    factory: EnvFactory
    env: TextEnvironment
    max_turns: int
    max_chars: int
    kwargs: dict[str, Any]
    hint: str | None
    check_solution: bool
    played: list[SeedPlay] = field(default_factory=list)
    tally: ProbeTally = field(default_factory=ProbeTally)
    steps: int = 0
    hint_won: int | None = None
    hint_won_obs: str = ""
    reuse_resets: bool = False
    seeds_left: int = 0
    """Planned seeds still to play after the current one (a settled probe skips them)."""
    kept: dict[str, str] = field(default_factory=dict)
    """Key -> observation, for the resets whose state the environment keeps."""
    feasibility: Feasibility | None = None
    """The twin analysis of ``check_feasible`` (None before it ran, or without a solution)."""


def real_reset(run: CheckRun, seed: int, key: str) -> str:
    """A real reset whose state, with ``reuse_resets``, a sandboxed environment keeps under
    ``key``."""
    return real_reset_info(run, seed, key)[0]


def real_reset_info(run: CheckRun, seed: int, key: str) -> tuple[str, dict]:
    """:func:`real_reset`'s observation and the reset's ``info``."""
    first, info = checked_reset_info(run.env, seed, run.max_chars)
    keep = getattr(run.env, "_keep_reset", None) if run.reuse_resets else None
    if keep is not None and keep(key):
        run.kept[key] = first
    return first, info


def reset_again(run: CheckRun, seed: int, key: str) -> str:
    """The seed's reset once more: a copy of the state kept under ``key`` when there is one
    (the same state, for a fraction of the time), else a real reset.

    Three resets per seed stay real (``check_reset``'s, the last probe's, after the other
    probes' episodes, and the one before ``solution()``'s second call) and every comparison
    of two resets of one seed has a real one on a side, so a reset that draws outside the
    seed, or state carried over from earlier episodes or calls, still shows."""
    if key in run.kept and run.env._reset_from_kept(key):  # type: ignore[attr-defined]
        return run.kept[key]
    return checked_reset(run.env, seed, run.max_chars)


def first_key(seed: int) -> str:
    return f"{seed}"


def last_key(seed: int) -> str:
    return f"{seed}/last-probe"


def from_kept(
    run: CheckRun, seed: int, key: str, play: Callable[[str, str | None], Transcript]
) -> tuple[str, Transcript]:
    """``play(first observation, restore key)`` from the seed's reset once more, as
    :func:`reset_again` gives it: where the environment batches, the copy of the kept state
    is made in the same sandbox call as the episode's first steps."""
    if key in run.kept:
        try:
            return run.kept[key], play(run.kept[key], key)
        except NotKept:  # nothing was played: the worker holds no such state
            pass
    first = reset_again(run, seed, key)
    return first, play(first, None)


def play_again(run: CheckRun, seed: int, actions: list[str]) -> tuple[str, Transcript]:
    """:func:`play_actions` from a copy of the seed's first reset."""
    return from_kept(
        run, seed, first_key(seed),
        lambda _obs, key: play_on(run.env, seed, actions, run.max_turns, run.max_chars, key),
    )  # fmt: skip


def probe_on(
    run: CheckRun, seed: int, probe: Policy, first: str, env: TextEnvironment | None = None,
    restore: str | None = None,
) -> Transcript:  # fmt: skip
    """The probe's episode on ``env`` (the run's own by default) from the state the last
    reset (which showed ``first``) left, or from the state kept under ``restore``; a probe
    that never reads the observation sends its actions in batches, the others speculate."""
    env = env or run.env
    fixed = open_loop_actions(probe, run.max_turns)
    if fixed is not None:
        return play_fixed(env, seed, fixed.__getitem__, run.max_turns, run.max_chars, restore)
    policy = lambda obs, last, _turn: probe(obs, last)  # noqa: E731
    return play_policy(
        env, seed, policy, first, run.max_turns, run.max_chars, speculate=True, restore=restore
    )


def replay_on(
    env: TextEnvironment, run: CheckRun, seed: int, transcript: Transcript,
    restore: str | None = None,
) -> Transcript:  # fmt: skip
    """The actions of ``transcript`` again, in batches (a deterministic environment replies
    alike, so the probe that chose them would choose them again)."""
    actions = [step[0] for step in transcript]
    return play_fixed(env, seed, actions.__getitem__, len(actions), run.max_chars, restore)
