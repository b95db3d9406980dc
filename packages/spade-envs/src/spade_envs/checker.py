"""The contract checker: plays an environment with probe actions and its own solution.

:func:`check_env` raises :class:`~spade_envs.errors.ContractError` with a stable reason code and
a message that says how to fix the problem; it returns a :class:`CheckReport` when every check
passes. The corpus validator (spade-corpus) calls it instead of re-implementing the checks.
The checks themselves are named functions in :mod:`spade_envs.checks` (``CHECKS``).
Exceptions raised by the environment are wrapped in a ContractError whose ``__cause__`` is the
original exception (for a sandboxed environment, a spade-sandbox error with its own reason).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .core import (
    DEFAULT_MAX_TURNS,
    MAX_OBSERVATION_CHARS,
    REWARD_BOUNDS,
    EnvFactory,
    TextEnvironment,
    episode_return,
)
from .errors import ContractError

__all__ = [
    "CheckReport",
    "check_env",
    "check_step_result",
    "play_actions",
    "solution_actions",
]

Transcript = list[tuple[str, str, float, bool, bool]]


#: Contract reason codes check_env can raise, with what each means.
REASON_CODES: dict[str, str] = {
    "construct_failed": "the class could not be constructed with max_turns",
    "reset_raised": "reset(seed) raised",
    "reset_return_type": "reset did not return (str, dict)",
    "step_raised": "step(action) raised",
    "step_return_type": "step did not return (str, float, bool, bool, dict)",
    "observation_empty": "an observation was empty",
    "observation_too_long": "an observation exceeded the size limit",
    "observation_charset": "an observation held control characters (ANSI escapes) or characters outside the Basic Multilingual Plane",
    "info_not_json": "an info dict was not JSON-serializable",
    "reward_not_finite": "a reward was NaN or infinite",
    "reward_out_of_bounds": "a reward was outside REWARD_BOUNDS",
    "no_termination": "a probe episode neither terminated nor truncated within max_turns",
    "nondeterministic": "the same seed and actions gave a different transcript",
    "seed_ignored": "different seeds gave identical episodes",
    "solution_raised": "solution() raised",
    "solution_type": "solution() did not return a non-empty str",
    "solution_fails": "playing solution() did not win the episode",
    "hint_empty": "the hint is empty",
    "hint_leaked": "the hint text appears in an observation",
    "hint_is_answer": "playing the hint as an action wins the episode",
    "close_raised": "close() raised",
    "solution_leaked": "the final action of solution() appears in the first observation of every seed",
    "reward_ignores_action": "every probe action got the solution's rewards on every seed",
    "probe_wins": "a probe action (empty, garbage, a common answer, random, a token of the observation) wins on most seeds",
}

# What Gymnasium's Text space of the adapter admits (spade_envs.gym_env.TEXT_CHARSET): tab,
# newline, carriage return, printable ASCII and the Basic Multilingual Plane past the C1 block.
_BAD_CHARS = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]")


@dataclass(frozen=True)
class CheckReport:
    """What check_env observed on an environment that passed."""

    seeds: tuple[int, ...]
    probe_episodes: int
    steps: int
    solution_turns: int
    max_first_observation_chars: int
    transcripts: list[list[tuple[str, str, float, bool, bool]]] = field(
        repr=False, default_factory=list
    )
    probe_win_rate: float = 0.0
    """Probe episodes won over probe episodes played (real games: 0.0)."""
    probe_wins: dict[str, int] = field(default_factory=dict)
    """Probe name -> on how many seeds it won."""


def _fail(code: str, message: str, cause: BaseException | None = None) -> ContractError:
    err = ContractError(code, message)
    err.__cause__ = cause
    return err


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _check_observation(obs: str, where: str, max_chars: int) -> None:
    if not obs.strip():
        raise _fail(
            "observation_empty",
            f"{where} returned an empty observation; describe the state in text",
        )
    if len(obs) > max_chars:
        raise _fail(
            "observation_too_long",
            f"{where} returned {len(obs)} characters (limit {max_chars}); shorten the observation",
        )
    bad = _BAD_CHARS.search(obs)
    if bad is not None:
        raise _fail(
            "observation_charset",
            f"{where} returned the character {bad.group()!r} (ANSI escapes and control characters are not text); "
            "write plain text within the Basic Multilingual Plane",
        )


def check_step_result(
    result: Any, where: str = "step", max_chars: int = MAX_OBSERVATION_CHARS
) -> None:
    """Raise ContractError unless ``result`` is a valid ``(obs, reward, terminated, truncated, info)``."""
    if not (isinstance(result, tuple) and len(result) == 5):
        raise _fail(
            "step_return_type",
            f"{where} returned {type(result).__name__} of length {len(result) if hasattr(result, '__len__') else '?'}; "
            "return a 5-tuple (observation, reward, terminated, truncated, info)",
        )
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise _fail(
            "step_return_type", f"{where}: observation is {type(obs).__name__}; return a str"
        )
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise _fail(
            "step_return_type", f"{where}: reward is {type(reward).__name__}; return a float"
        )
    if not math.isfinite(reward):
        raise _fail("reward_not_finite", f"{where}: reward is {reward}; return a finite float")
    low, high = REWARD_BOUNDS
    if not low <= reward <= high:
        raise _fail(
            "reward_out_of_bounds",
            f"{where}: reward {reward} is outside [{low}, {high}]; rescale it",
        )
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise _fail(
            "step_return_type",
            f"{where}: terminated/truncated are {type(terminated).__name__}/{type(truncated).__name__}; return bools",
        )
    if not isinstance(info, dict):
        raise _fail("step_return_type", f"{where}: info is {type(info).__name__}; return a dict")
    if not _json_ok(info):
        raise _fail(
            "info_not_json",
            f"{where}: info is not JSON-serializable; keep it to str/int/float/bool/list/dict",
        )
    _check_observation(obs, where, max_chars)


def _reset(env: TextEnvironment, seed: int, max_chars: int) -> str:
    try:
        result = env.reset(seed=seed)
    except Exception as exc:
        raise _fail(
            "reset_raised", f"reset(seed={seed}) raised {type(exc).__name__}: {exc}", exc
        ) from exc
    if not (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], str)
        and isinstance(result[1], dict)
    ):
        raise _fail(
            "reset_return_type",
            f"reset(seed={seed}) must return (str, dict), got {type(result).__name__}",
        )
    if not _json_ok(result[1]):
        raise _fail("info_not_json", f"reset(seed={seed}): info is not JSON-serializable")
    _check_observation(result[0], f"reset(seed={seed})", max_chars)
    return result[0]


def play_actions(
    env: TextEnvironment,
    seed: int,
    actions: Sequence[str],
    max_turns: int,
    max_chars: int = MAX_OBSERVATION_CHARS,
) -> tuple[str, list[tuple[str, str, float, bool, bool]]]:
    """Reset with ``seed`` and step ``actions`` (cycled) until the episode ends or ``max_turns``.

    Returns the first observation and the transcript ``[(action, obs, reward, term, trunc), …]``.
    """
    first = _reset(env, seed, max_chars)
    return first, _play_on(env, seed, actions, max_turns, max_chars)


def _play_on(
    env: TextEnvironment, seed: int, actions: Sequence[str], max_turns: int, max_chars: int
) -> list[tuple[str, str, float, bool, bool]]:
    """Step ``actions`` (cycled) from the state the last reset left, as in :func:`play_actions`."""
    transcript: list[tuple[str, str, float, bool, bool]] = []
    for turn in range(max_turns):
        action = actions[turn % len(actions)]
        where = f"step #{turn + 1} (seed={seed}, action={action[:40]!r})"
        try:
            result = env.step(action)
        except Exception as exc:
            raise _fail("step_raised", f"{where} raised {type(exc).__name__}: {exc}", exc) from exc
        check_step_result(result, where, max_chars)
        obs, reward, terminated, truncated, _ = result
        transcript.append((action, obs, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return transcript


def solution_actions(text: str) -> list[str]:
    """The actions of a ``solution()`` text: its non-empty lines."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _won(transcript: list[tuple[str, str, float, bool, bool]]) -> bool:
    if not transcript:
        return False
    _, _, reward, terminated, _ = transcript[-1]
    return episode_return(reward, terminated) >= 1.0


def _close_quietly(env: TextEnvironment) -> None:
    try:
        env.close()
    except Exception:
        pass  # the first failure is the one worth reporting


def check_env(
    factory: EnvFactory,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_turns: int = DEFAULT_MAX_TURNS,
    kwargs: dict[str, Any] | None = None,
    hint: str | None = None,
    check_solution: bool = True,
    max_observation_chars: int = MAX_OBSERVATION_CHARS,
    reuse_resets: bool = True,
) -> CheckReport:
    """Check that ``factory`` builds environments that follow the contract.

    Runs :data:`CHECKS` in order: per seed, reset types, sizes and characters; the probe
    battery (:func:`spade_envs.probes.probe_battery`), whose episodes must end within
    ``max_turns``; determinism under the seed; with ``hint``: never shown and not itself the
    answer; ``solution()`` wins. Then across seeds: seeds matter, the answer is not printed,
    a second instance plays alike, the reward depends on the action and no probe wins on most
    seeds. Raises ContractError with the first failing check's reason code.

    ``reuse_resets``: a sandboxed environment (``load_env(..., sandbox=True)``) keeps the state
    of each seed's first reset in its worker and the probes that only need that state again
    start from a copy of it (three real resets per seed instead of eleven; the report is the
    same either way, and an environment whose state cannot be copied is reset for real).
    ``False`` resets for real every time.
    """
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("check_env needs at least one seed")
    kwargs = dict(kwargs or {})
    try:
        env = factory(max_turns=max_turns, **kwargs)
    except Exception as exc:
        raise _fail(
            "construct_failed",
            f"constructing with max_turns={max_turns} raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    if hint is not None and not hint.strip():
        _close_quietly(env)
        raise _fail("hint_empty", "the hint is empty; write one or two sentences of strategy")
    from .checks import CHECKS, _Run, _Seed  # the checks build on this module's primitives

    run = _Run(factory, env, max_turns, max_observation_chars, kwargs, hint, check_solution)
    run.reuse_resets = reuse_resets
    try:
        for seed in seeds:
            played = _Seed(seed)
            for _, per_seed, check, _ in CHECKS:
                if per_seed:
                    check(run, played)
            run.played.append(played)
            run.tally.add_seed(played.probes, played.solution_play)
        for _, per_seed, check, _ in CHECKS:
            if not per_seed:
                check(run)
    except BaseException:
        _close_quietly(env)
        raise
    try:
        env.close()
    except Exception as exc:
        raise _fail("close_raised", f"close() raised {type(exc).__name__}: {exc}", exc) from exc
    return CheckReport(
        seeds,
        run.tally.episodes,
        run.steps,
        max((len(s.solution_play or []) for s in run.played), default=0),
        max(len(s.first) for s in run.played),
        [t for s in run.played for _, t, _ in s.probes],
        probe_win_rate=run.tally.win_rate,
        probe_wins=dict(run.tally.wins),
    )
