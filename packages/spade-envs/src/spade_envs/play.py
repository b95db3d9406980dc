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
    if type(value) is dict and not value:  # the usual info: nothing to encode
        return True
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
    """``reset(seed)``'s first observation, checked (ContractError when the reset breaks the
    contract)."""
    return checked_reset_info(env, seed, max_chars)[0]


def checked_reset_info(env: TextEnvironment, seed: int, max_chars: int) -> tuple[str, dict]:
    """:func:`checked_reset`'s observation and the reset's ``info``."""
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
    return result[0], result[1]


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
    env: TextEnvironment, seed: int, actions: Sequence[str], max_turns: int, max_chars: int,
    restore: str | None = None,
) -> list[tuple[str, str, float, bool, bool]]:  # fmt: skip
    """Step ``actions`` (cycled) from the state the last reset left, as in :func:`play_actions`
    (``restore``: as for :func:`play_fixed`)."""
    return play_fixed(
        env, seed, lambda turn: actions[turn % len(actions)], max_turns, max_chars, restore
    )


Choose = Callable[[str, str | None, int], str]
"""A policy: ``(observation, last action or None, turn) -> action``."""

#: Most steps per sandbox call when the actions are chosen ahead (see :func:`play_fixed`).
BATCH_STEPS = 16


class NotKept(LookupError):
    """A play asked to start from a kept state that the environment does not hold (nothing
    was played): reset and play again."""


def play_policy(
    env: TextEnvironment,
    seed: int,
    policy: Choose,
    first: str,
    max_turns: int,
    max_chars: int,
    *,
    speculate: bool = False,
    restore: str | None = None,
) -> list[tuple[str, str, float, bool, bool]]:
    """Step the actions ``policy(observation, last action, turn)`` chooses, from the state the
    last reset (which showed ``first``) left, until the episode ends or ``max_turns``.

    ``speculate`` (a policy without side effects, such as a probe): a sandboxed environment
    takes the actions the policy would choose if the observation stayed as it is, in one call,
    and stops where it changes; the transcript is the same as step by step.

    ``restore`` (a batching environment): start from the state it kept under that key, in
    the first call; :class:`NotKept` when it keeps none."""
    many = _batched(env) if speculate or restore is not None else None
    if many is not None:
        return _play_batched(many, seed, policy, first, (max_turns, max_chars), speculate, restore)
    if restore is not None:
        raise NotKept(restore)
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


def play_fixed(
    env: TextEnvironment,
    seed: int,
    action_at: Callable[[int], str],
    max_turns: int,
    max_chars: int,
    restore: str | None = None,
) -> list[tuple[str, str, float, bool, bool]]:
    """:func:`play_policy` for actions chosen by the turn alone (``action_at(turn)``): the same
    transcript and the same errors. A sandboxed environment takes up to :data:`BATCH_STEPS`
    of them per call (its ``_step_many``) instead of one call per step. ``restore``: as for
    :func:`play_policy`."""
    policy: Choose = lambda _obs, _last, turn: action_at(turn)  # noqa: E731
    many = _batched(env)
    if many is None:
        return play_policy(env, seed, policy, "", max_turns, max_chars, restore=restore)
    return _play_batched(many, seed, policy, "", (max_turns, max_chars), False, restore)


def _batched(env: TextEnvironment) -> Callable[..., Any] | None:
    """The environment's batched step (``_step_many``), when its own class has one (a wrapper
    that forwards unknown names would skip its own ``step`` in between)."""
    many = getattr(env, "_step_many", None) if hasattr(type(env), "_step_many") else None
    return many if callable(many) else None


def _batch_size(
    transcript: list[tuple[str, str, float, bool, bool]], first: str, speculate: bool
) -> int:
    """How many actions the next call sends: all it may when they do not depend on the
    replies; when speculating, one from the first observation (the first reply rarely repeats
    it), many once the last two observations were the same, else two."""
    if not speculate:
        return BATCH_STEPS
    if not transcript:
        return 1
    before = transcript[-2][1] if len(transcript) > 1 else first
    return BATCH_STEPS if transcript[-1][1] == before else 2


def _play_batched(
    many: Callable[..., Any], seed: int, policy: Choose, first: str, limits: tuple[int, int],
    speculate: bool, restore: str | None,
) -> list[tuple[str, str, float, bool, bool]]:  # fmt: skip
    """:func:`play_policy` through ``many``: each call takes the actions ``policy`` chooses
    while the observation stays the last one seen (with ``speculate``; else regardless)."""
    max_turns, max_chars = limits
    transcript: list[tuple[str, str, float, bool, bool]] = []
    obs, last = first, None
    while len(transcript) < max_turns:
        turn = len(transcript)
        chunk: list[str] = []
        for t in range(turn, min(max_turns, turn + _batch_size(transcript, first, speculate))):
            chunk.append(policy(obs, chunk[-1] if chunk else last, t))
        try:
            got = many(chunk, obs if speculate else None, restore)
        except Exception as exc:  # refused before any step: the first step's error
            got = [], exc
        if got is None:
            raise NotKept(str(restore))
        results, error = got
        restore = None
        if error is None and not results:
            error = RuntimeError("the batch took no step")  # a handle that breaks the contract
        for action, result in zip(chunk, results, strict=False):
            where = f"step #{len(transcript) + 1} (seed={seed}, action={action[:40]!r})"
            check_step_result(result, where, max_chars)
            transcript.append((action, result[0], float(result[1]), result[2], result[3]))
            if result[2] or result[3]:
                return transcript
        if error is not None:
            action = chunk[len(results)]
            where = f"step #{len(transcript) + 1} (seed={seed}, action={action[:40]!r})"
            message = f"{where} raised {type(error).__name__}: {error}"
            raise fail("step_raised", message, error) from error
        obs, last = transcript[-1][1], transcript[-1][0]
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


def replayed(
    probe: Callable[[str, str | None], str],
    first: str,
    played: dict[tuple[str, ...], tuple[str, str, float, bool, bool]],
) -> Transcript | None:
    """The probe's episode when every action it would take was already played from the
    same reset by earlier probes (the environment is checked to be deterministic), else None.

    Many probes choose the same actions on a one-turn game (the first number, the first token
    and the echoed action are often one answer): each distinct episode is played once."""
    transcript: Transcript = []
    obs, last = first, None
    actions: tuple[str, ...] = ()
    while True:
        last = probe(obs, last)
        actions = (*actions, last)
        step = played.get(actions)
        if step is None:
            return None
        transcript.append(step)
        obs = step[1]
        if step[3] or step[4]:
            return transcript
