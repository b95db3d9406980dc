"""The contract checker: plays an environment with probe actions and its own solution.

:func:`check_env` raises :class:`~spade_envs.errors.ContractError` with a stable reason code and
a message that says how to fix the problem; it returns a :class:`CheckReport` when every check
passes. The corpus validator (spade-corpus) calls it instead of re-implementing the checks.
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

__all__ = ["CheckReport", "check_env", "check_step_result", "play_actions", "solution_actions"]


#: Contract reason codes check_env can raise, with what each means.
REASON_CODES: dict[str, str] = {
    "construct_failed": "the class could not be constructed with max_turns",
    "reset_raised": "reset(seed) raised",
    "reset_return_type": "reset did not return (str, dict)",
    "step_raised": "step(action) raised",
    "step_return_type": "step did not return (str, float, bool, bool, dict)",
    "observation_empty": "an observation was empty",
    "observation_too_long": "an observation exceeded the size limit",
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
}

_BOXED = re.compile(r"\\boxed\{")
_TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z]+")


@dataclass(frozen=True)
class CheckReport:
    """What check_env observed on an environment that passed."""

    seeds: tuple[int, ...]
    probe_episodes: int
    steps: int
    solution_turns: int
    max_first_observation_chars: int
    transcripts: list[list[tuple[str, str, float, bool, bool]]] = field(repr=False, default_factory=list)


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
        raise _fail("observation_empty", f"{where} returned an empty observation; describe the state in text")
    if len(obs) > max_chars:
        raise _fail(
            "observation_too_long",
            f"{where} returned {len(obs)} characters (limit {max_chars}); shorten the observation",
        )


def check_step_result(result: Any, where: str = "step", max_chars: int = MAX_OBSERVATION_CHARS) -> None:
    """Raise ContractError unless ``result`` is a valid ``(obs, reward, terminated, truncated, info)``."""
    if not (isinstance(result, tuple) and len(result) == 5):
        raise _fail(
            "step_return_type",
            f"{where} returned {type(result).__name__} of length {len(result) if hasattr(result, '__len__') else '?'}; "
            "return a 5-tuple (observation, reward, terminated, truncated, info)",
        )
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise _fail("step_return_type", f"{where}: observation is {type(obs).__name__}; return a str")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise _fail("step_return_type", f"{where}: reward is {type(reward).__name__}; return a float")
    if not math.isfinite(reward):
        raise _fail("reward_not_finite", f"{where}: reward is {reward}; return a finite float")
    low, high = REWARD_BOUNDS
    if not low <= reward <= high:
        raise _fail("reward_out_of_bounds", f"{where}: reward {reward} is outside [{low}, {high}]; rescale it")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise _fail(
            "step_return_type",
            f"{where}: terminated/truncated are {type(terminated).__name__}/{type(truncated).__name__}; return bools",
        )
    if not isinstance(info, dict):
        raise _fail("step_return_type", f"{where}: info is {type(info).__name__}; return a dict")
    if not _json_ok(info):
        raise _fail("info_not_json", f"{where}: info is not JSON-serializable; keep it to str/int/float/bool/list/dict")
    _check_observation(obs, where, max_chars)


def _reset(env: TextEnvironment, seed: int, max_chars: int) -> str:
    try:
        result = env.reset(seed=seed)
    except Exception as exc:
        raise _fail("reset_raised", f"reset(seed={seed}) raised {type(exc).__name__}: {exc}", exc) from exc
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str) and isinstance(result[1], dict)):
        raise _fail("reset_return_type", f"reset(seed={seed}) must return (str, dict), got {type(result).__name__}")
    if not _json_ok(result[1]):
        raise _fail("info_not_json", f"reset(seed={seed}): info is not JSON-serializable")
    _check_observation(result[0], f"reset(seed={seed})", max_chars)
    return result[0]


def play_actions(
    env: TextEnvironment, seed: int, actions: Sequence[str], max_turns: int, max_chars: int = MAX_OBSERVATION_CHARS
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


def _probe_actions(first_observation: str) -> list[list[str]]:
    tokens = list(dict.fromkeys(_TOKEN.findall(first_observation)))[:12] or ["0"]
    return [
        [""],
        ["hello?", "\\boxed{}", "\\boxed{", "}}{{", "\\boxed{\\boxed{1}}"],
        ["x" * 10_000],
        [f"\\boxed{{{t}}}" for t in tokens],
    ]


def _won(transcript: list[tuple[str, str, float, bool, bool]]) -> bool:
    if not transcript:
        return False
    _, _, reward, terminated, _ = transcript[-1]
    return episode_return(reward, terminated) >= 1.0


def check_env(
    factory: EnvFactory,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_turns: int = DEFAULT_MAX_TURNS,
    kwargs: dict[str, Any] | None = None,
    hint: str | None = None,
    check_solution: bool = True,
    max_observation_chars: int = MAX_OBSERVATION_CHARS,
) -> CheckReport:
    """Check that ``factory`` builds environments that follow the contract.

    Per seed: reset types and sizes, probe episodes (empty, garbage, very long, and tokens drawn
    from the observation) that must end within ``max_turns``, determinism under the seed, and
    that ``solution()`` wins. Across seeds: not every first observation may be identical. With
    ``hint`` given: non-empty, never shown in an observation, and not itself a winning action.
    """
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("check_env needs at least one seed")
    try:
        env = factory(max_turns=max_turns, **(kwargs or {}))
    except Exception as exc:
        raise _fail("construct_failed", f"constructing with max_turns={max_turns} raised {type(exc).__name__}: {exc}", exc) from exc
    if hint is not None and not hint.strip():
        raise _fail("hint_empty", "the hint is empty; write one or two sentences of strategy")
    # What each seed's episode looked like (first observation, probe replies, solution): hidden
    # state may differ while the first observation does not, so all of it is compared.
    fingerprints: list[list[object]] = []
    transcripts: list[list[tuple[str, str, float, bool, bool]]] = []
    steps = probes = solution_turns = first_chars = 0
    try:
        for seed in seeds:
            # Every reset of this seed must give the first observation again (the probes' resets
            # check it, so no reset is spent on that alone: resets dominate validation time).
            first = _reset(env, seed, max_observation_chars)
            fingerprints.append([first])
            first_chars = max(first_chars, len(first))
            episode_start = len(transcripts)
            for index, actions in enumerate(_probe_actions(first)):
                if index == 0:  # the first probe plays on from the reset above
                    again_first, transcript = first, _play_on(env, seed, actions, max_turns, max_observation_chars)
                else:
                    again_first, transcript = play_actions(env, seed, actions, max_turns, max_observation_chars)
                if again_first != first:
                    raise _fail("nondeterministic", f"reset(seed={seed}) twice gave different observations; draw randomness only from random.Random(seed)")
                probes += 1
                steps += len(transcript)
                last = transcript[-1]
                if not (last[3] or last[4]):
                    raise _fail("no_termination", f"seed={seed}: a probe episode ran {max_turns} steps without terminated or truncated; truncate at max_turns")
                transcripts.append(transcript)
            fingerprints[-1].append(transcripts[episode_start:])
            _, again = play_actions(env, seed, _probe_actions(first)[-1], max_turns, max_observation_chars)
            if again != transcripts[-1]:
                raise _fail("nondeterministic", f"seed={seed}: replaying the same actions gave a different transcript; keep all state in the instance and seed it in reset")
            if hint is not None:
                for _, obs, *_ in [("", first, 0.0, False, False), *transcripts[-1]]:
                    if hint.strip() in obs:
                        raise _fail("hint_leaked", f"seed={seed}: the hint text appears in an observation; the hint must be privileged")
                _, hinted = play_actions(env, seed, [hint], max_turns, max_observation_chars)
                if _won(hinted):
                    raise _fail("hint_is_answer", f"seed={seed}: the hint played as an action wins; the hint must help, not answer")
            if check_solution:
                _reset(env, seed, max_observation_chars)
                try:
                    text = env.solution()
                except Exception as exc:
                    raise _fail("solution_raised", f"solution() after reset(seed={seed}) raised {type(exc).__name__}: {exc}", exc) from exc
                if not isinstance(text, str) or not solution_actions(text):
                    raise _fail("solution_type", f"solution() after reset(seed={seed}) returned {text!r}; return the winning actions, one per line")
                _reset(env, seed, max_observation_chars)
                if env.solution() != text:
                    raise _fail("nondeterministic", f"solution() after reset(seed={seed}) differs between two resets; draw randomness only from random.Random(seed)")
                _, played = play_actions(env, seed, solution_actions(text), max_turns, max_observation_chars)
                if not _won(played) or len(played) > len(solution_actions(text)):
                    raise _fail("solution_fails", f"seed={seed}: playing solution() did not win within {max_turns} turns; fix solution() or the win check")
                solution_turns = max(solution_turns, len(played))
                fingerprints[-1].append(text)
        if len(seeds) > 1 and all(f == fingerprints[0] for f in fingerprints):
            raise _fail("seed_ignored", f"seeds {list(seeds)} all gave identical episodes (observations, probe replies and solution); build the episode from random.Random(seed)")
    except BaseException:
        try:
            env.close()
        except Exception:
            pass  # the first failure is the one worth reporting
        raise
    try:
        env.close()
    except Exception as exc:
        raise _fail("close_raised", f"close() raised {type(exc).__name__}: {exc}", exc) from exc
    return CheckReport(seeds, probes, steps, solution_turns, first_chars, transcripts)
