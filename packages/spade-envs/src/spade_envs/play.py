"""The playing primitives of the contract checker: checked resets and steps, episodes, wins.

:mod:`spade_envs.checker` (``check_env``) and :mod:`spade_envs.checks` (its named checks) both
build on these; keeping them here lets the two import this module instead of each other.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from .core import MAX_OBSERVATION_CHARS, REWARD_BOUNDS, TextEnvironment, episode_return
from .errors import ContractError, Evidence

__all__ = [
    "Transcript",
    "check_step_result",
    "checked_reset",
    "close_quietly",
    "fail",
    "play_actions",
    "play_on",
    "solution_actions",
    "won",
]

Transcript = list[tuple[str, str, float, bool, bool]]

# What Gymnasium's Text space of the adapter admits (spade_envs.gym_env.TEXT_CHARSET): tab,
# newline, carriage return, printable ASCII and the Basic Multilingual Plane past the C1 block.
_BAD_CHARS = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]")


def fail(
    code: str,
    message: str,
    cause: BaseException | None = None,
    evidence: Evidence | None = None,
) -> ContractError:
    """A ContractError with ``code``, its cause and what it saw (``evidence``)."""
    err = ContractError(code, message, evidence)
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
        raise fail(
            "observation_empty",
            f"{where} returned an empty observation; describe the state in text",
        )
    if len(obs) > max_chars:
        raise fail(
            "observation_too_long",
            f"{where} returned {len(obs)} characters (limit {max_chars}); shorten the observation",
        )
    bad = _BAD_CHARS.search(obs)
    if bad is not None:
        raise fail(
            "observation_charset",
            f"{where} returned the character {bad.group()!r} (ANSI escapes and control characters are not text); "
            "write plain text within the Basic Multilingual Plane",
        )


def check_step_result(
    result: Any, where: str = "step", max_chars: int = MAX_OBSERVATION_CHARS
) -> None:
    """Raise ContractError unless ``result`` is a valid ``(obs, reward, terminated, truncated, info)``."""
    if not (isinstance(result, tuple) and len(result) == 5):
        raise fail(
            "step_return_type",
            f"{where} returned {type(result).__name__} of length {len(result) if hasattr(result, '__len__') else '?'}; "
            "return a 5-tuple (observation, reward, terminated, truncated, info)",
        )
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise fail(
            "step_return_type", f"{where}: observation is {type(obs).__name__}; return a str"
        )
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise fail(
            "step_return_type", f"{where}: reward is {type(reward).__name__}; return a float"
        )
    if not math.isfinite(reward):
        raise fail("reward_not_finite", f"{where}: reward is {reward}; return a finite float")
    low, high = REWARD_BOUNDS
    if not low <= reward <= high:
        raise fail(
            "reward_out_of_bounds",
            f"{where}: reward {reward} is outside [{low}, {high}]; rescale it",
        )
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise fail(
            "step_return_type",
            f"{where}: terminated/truncated are {type(terminated).__name__}/{type(truncated).__name__}; return bools",
        )
    if not isinstance(info, dict):
        raise fail("step_return_type", f"{where}: info is {type(info).__name__}; return a dict")
    if not _json_ok(info):
        raise fail(
            "info_not_json",
            f"{where}: info is not JSON-serializable; keep it to str/int/float/bool/list/dict",
        )
    _check_observation(obs, where, max_chars)


def checked_reset(env: TextEnvironment, seed: int, max_chars: int) -> str:
    try:
        result = env.reset(seed=seed)
    except Exception as exc:
        raise fail(
            "reset_raised", f"reset(seed={seed}) raised {type(exc).__name__}: {exc}", exc
        ) from exc
    if not (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], str)
        and isinstance(result[1], dict)
    ):
        raise fail(
            "reset_return_type",
            f"reset(seed={seed}) must return (str, dict), got {type(result).__name__}",
        )
    if not _json_ok(result[1]):
        raise fail("info_not_json", f"reset(seed={seed}): info is not JSON-serializable")
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
    first = checked_reset(env, seed, max_chars)
    return first, play_on(env, seed, actions, max_turns, max_chars)


def play_on(
    env: TextEnvironment, seed: int, actions: Sequence[str], max_turns: int, max_chars: int
) -> list[tuple[str, str, float, bool, bool]]:
    """Step ``actions`` (cycled) from the state the last reset left, as in :func:`play_actions`."""
    return play_policy(
        env, seed, lambda _obs, _last, turn: actions[turn % len(actions)], "", max_turns, max_chars
    )


def play_policy(
    env: TextEnvironment,
    seed: int,
    policy: Callable[[str, str | None, int], str],
    first: str,
    max_turns: int,
    max_chars: int,
) -> list[tuple[str, str, float, bool, bool]]:
    """Step the actions ``policy(observation, last action, turn)`` chooses, from the state the
    last reset (which showed ``first``) left, until the episode ends or ``max_turns``."""
    transcript: list[tuple[str, str, float, bool, bool]] = []
    obs, last = first, None
    for turn in range(max_turns):
        action = policy(obs, last, turn)
        last = action
        where = f"step #{turn + 1} (seed={seed}, action={action[:40]!r})"
        try:
            result = env.step(action)
        except Exception as exc:
            raise fail("step_raised", f"{where} raised {type(exc).__name__}: {exc}", exc) from exc
        check_step_result(result, where, max_chars)
        obs, reward, terminated, truncated, _ = result
        transcript.append((action, obs, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return transcript


def solution_actions(text: str) -> list[str]:
    """The actions of a ``solution()`` text: its non-empty lines."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def won(transcript: list[tuple[str, str, float, bool, bool]]) -> bool:
    if not transcript:
        return False
    _, _, reward, terminated, _ = transcript[-1]
    return episode_return(reward, terminated) >= 1.0


def close_quietly(env: TextEnvironment) -> None:
    try:
        env.close()
    except Exception:
        pass  # the first failure is the one worth reporting
