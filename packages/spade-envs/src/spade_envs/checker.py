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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .core import DEFAULT_MAX_TURNS, REWARD_BOUNDS, EnvFactory, TextEnvironment, episode_return
from .errors import ContractError
from .probes import ProbeTally, probe_battery

__all__ = [
    "CHECKS",
    "CheckReport",
    "check_env",
    "check_step_result",
    "play_actions",
    "solution_actions",
]

Transcript = list[tuple[str, str, float, bool, bool]]

MAX_OBSERVATION_CHARS = 16_384

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


# ---- the named checks ---------------------------------------------------------------------
# Each check is a small function over one seed's play (_Seed) or over the whole run (_Run);
# CHECKS lists them in the order they run, each with the reason codes it can raise.


@dataclass
class _Seed:
    seed: int
    first: str = ""
    probes: list[tuple[str, Transcript, bool]] = field(default_factory=list)
    solution_text: str | None = None
    solution_play: Transcript | None = None


@dataclass
class _Run:
    factory: EnvFactory
    env: TextEnvironment
    max_turns: int
    max_chars: int
    kwargs: dict[str, Any]
    hint: str | None
    check_solution: bool
    played: list[_Seed] = field(default_factory=list)
    tally: ProbeTally = field(default_factory=ProbeTally)
    steps: int = 0
    hint_won: int | None = None


def check_reset(run: _Run, s: _Seed) -> None:
    """Reset returns (str, dict) of the right size and characters (the probes repeat it)."""
    s.first = _reset(run.env, s.seed, run.max_chars)


def check_probe_episodes(run: _Run, s: _Seed) -> None:
    """Every probe episode ends within max_turns and every reset of the seed looks the same."""
    for index, (name, actions) in enumerate(probe_battery(s.first, s.seed)):
        if index == 0:  # the first probe plays on from check_reset's reset
            again, transcript = (
                s.first,
                _play_on(run.env, s.seed, actions, run.max_turns, run.max_chars),
            )
        else:
            again, transcript = play_actions(run.env, s.seed, actions, run.max_turns, run.max_chars)
        if again != s.first:
            raise _fail(
                "nondeterministic",
                f"reset(seed={s.seed}) twice gave different observations; draw randomness only from random.Random(seed)",
            )
        last = transcript[-1]
        if not (last[3] or last[4]):
            raise _fail(
                "no_termination",
                f"seed={s.seed}: a probe episode ran {run.max_turns} steps without terminated or truncated; truncate at max_turns",
            )
        run.steps += len(transcript)
        s.probes.append((name, transcript, _won(transcript)))


def check_replay(run: _Run, s: _Seed) -> None:
    """The same seed and actions give the same transcript again in the same instance."""
    name, transcript, _ = s.probes[-1]
    actions = dict(probe_battery(s.first, s.seed))[name]
    _, again = play_actions(run.env, s.seed, actions, run.max_turns, run.max_chars)
    if again != transcript:
        raise _fail(
            "nondeterministic",
            f"seed={s.seed}: replaying the same actions gave a different transcript; keep all state in the instance and seed it in reset",
        )


def check_hint(run: _Run, s: _Seed) -> None:
    """The hint is never shown (in any probe observation); whether it wins is recorded."""
    if run.hint is None:
        return
    hint = run.hint.strip()
    for obs in [s.first, *(o for _, t, _ in s.probes for _, o, *_ in t)]:
        if hint in obs:
            raise _fail(
                "hint_leaked",
                f"seed={s.seed}: the hint text appears in an observation; the hint must be privileged",
            )
    _, hinted = play_actions(run.env, s.seed, [run.hint], run.max_turns, run.max_chars)
    if _won(hinted) and run.hint_won is None:
        run.hint_won = s.seed  # reported by check_hint_not_answer, after reward_uses_action


def check_hint_not_answer(run: _Run) -> None:
    """The hint, played as an action, wins on no seed."""
    if run.hint_won is not None:
        raise _fail(
            "hint_is_answer",
            f"seed={run.hint_won}: the hint played as an action wins; the hint must help, not answer",
        )


def check_solution(run: _Run, s: _Seed) -> None:
    """solution() returns the same non-empty actions after every reset, and they win."""
    if not run.check_solution:
        return
    env, seed = run.env, s.seed
    _reset(env, seed, run.max_chars)
    try:
        text = env.solution()
    except Exception as exc:
        raise _fail(
            "solution_raised",
            f"solution() after reset(seed={seed}) raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    if not isinstance(text, str) or not solution_actions(text):
        raise _fail(
            "solution_type",
            f"solution() after reset(seed={seed}) returned {text!r}; return the winning actions, one per line",
        )
    _reset(env, seed, run.max_chars)
    if env.solution() != text:
        raise _fail(
            "nondeterministic",
            f"solution() after reset(seed={seed}) differs between two resets; draw randomness only from random.Random(seed)",
        )
    _, played = play_actions(env, seed, solution_actions(text), run.max_turns, run.max_chars)
    if not _won(played) or len(played) > len(solution_actions(text)):
        raise _fail(
            "solution_fails",
            f"seed={seed}: playing solution() did not win within {run.max_turns} turns; fix solution() or the win check",
        )
    s.solution_text, s.solution_play = text, played


def check_seeds_matter(run: _Run) -> None:
    """Not every seed gives the same episode (observations, probe replies and solution)."""
    # The random probe's actions are drawn from the seed itself, so it is left out.
    prints = [
        [s.first, [t for n, t, _ in s.probes if n != "random"], s.solution_text] for s in run.played
    ]
    if len(prints) > 1 and all(p == prints[0] for p in prints):
        seeds = [s.seed for s in run.played]
        raise _fail(
            "seed_ignored",
            f"seeds {seeds} all gave identical episodes (observations, probe replies and solution); build the episode from random.Random(seed)",
        )


def check_solution_not_shown(run: _Run) -> None:
    """The solution's final action is not printed in the first observation of every seed.

    Requiring every seed keeps a format example (``answer like \\boxed{3}``) that happens to
    match one seed's answer from counting as a leak."""
    if not run.check_solution:
        return
    leaked = [
        a[-1]
        for s in run.played
        if (a := solution_actions(s.solution_text or "")) and a[-1] in s.first
    ]
    if leaked and len(leaked) == len(run.played):
        raise _fail(
            "solution_leaked",
            f"the final solution action {leaked[-1][:60]!r} appears in the first observation for seeds {[s.seed for s in run.played]}; do not print the answer",
        )


def check_determinism_across_instances(run: _Run) -> None:
    """A second instance (for a sandboxed factory: a second worker) replays the first seed's
    probe alike and gives every seed's solution again.

    Catches episodes salted by ``id(self)``, the process or anything else outside the seed."""
    s = run.played[0]
    name, transcript, _ = s.probes[-1]
    try:
        other = run.factory(max_turns=run.max_turns, **run.kwargs)
    except Exception as exc:
        raise _fail(
            "construct_failed",
            f"constructing a second instance raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    try:
        first, again = play_actions(
            other, s.seed, dict(probe_battery(s.first, s.seed))[name], run.max_turns, run.max_chars
        )
        same = first == s.first and again == transcript
        # Every seed's solution too: one seed's answer can coincide by chance.
        for played in run.played if same else ():
            if played.solution_text is not None:
                _reset(other, played.seed, run.max_chars)
                if other.solution() != played.solution_text:
                    same = False
                    break
    except ContractError:
        raise
    except Exception as exc:
        raise _fail(
            "nondeterministic",
            f"seed={s.seed}: a second instance raised {type(exc).__name__}: {exc} where the first did not",
            exc,
        ) from exc
    finally:
        _close_quietly(other)
    if not same:
        raise _fail(
            "nondeterministic",
            f"seed={s.seed}: a second instance played the same seed differently; derive every choice from the seed, never from id(), the process or the clock",
        )


def check_reward_uses_action(run: _Run) -> None:
    """Some action gets a different reward than the solution's on some seed."""
    if run.check_solution and run.tally.same_rewards_every_seed:
        raise _fail(
            "reward_ignores_action",
            "every probe action got exactly the rewards of solution() on every seed; compute the reward from the action",
        )


def check_probes_lose(run: _Run) -> None:
    """No probe (empty, garbage, common answers, random, observation tokens) wins on most seeds."""
    worst = run.tally.worst()
    if worst is not None:
        name, won = worst
        raise _fail(
            "probe_wins",
            f"the {name!r} probe won on {won} of {run.tally.seeds} seeds without solving anything; check the answer exactly and do not reveal it",
        )


Check = Callable[..., None]
#: The checks check_env runs: (name, per-seed?, function, reason codes), in order.
CHECKS: tuple[tuple[str, bool, Check, tuple[str, ...]], ...] = (
    (
        "reset",
        True,
        check_reset,
        (
            "reset_raised",
            "reset_return_type",
            "info_not_json",
            "observation_empty",
            "observation_too_long",
            "observation_charset",
        ),
    ),
    (
        "probe_episodes",
        True,
        check_probe_episodes,
        (
            "step_raised",
            "step_return_type",
            "reward_not_finite",
            "reward_out_of_bounds",
            "no_termination",
            "nondeterministic",
        ),
    ),
    ("replay", True, check_replay, ("nondeterministic",)),
    ("hint", True, check_hint, ("hint_leaked",)),
    (
        "solution",
        True,
        check_solution,
        ("solution_raised", "solution_type", "solution_fails", "nondeterministic"),
    ),
    ("seeds_matter", False, check_seeds_matter, ("seed_ignored",)),
    ("solution_not_shown", False, check_solution_not_shown, ("solution_leaked",)),
    (
        "determinism_across_instances",
        False,
        check_determinism_across_instances,
        ("nondeterministic", "construct_failed"),
    ),
    ("reward_uses_action", False, check_reward_uses_action, ("reward_ignores_action",)),
    ("hint_not_answer", False, check_hint_not_answer, ("hint_is_answer",)),
    ("probes_lose", False, check_probes_lose, ("probe_wins",)),
)


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
) -> CheckReport:
    """Check that ``factory`` builds environments that follow the contract.

    Runs :data:`CHECKS` in order: per seed, reset types, sizes and characters; the probe
    battery (:func:`spade_envs.probes.probe_battery`), whose episodes must end within
    ``max_turns``; determinism under the seed; with ``hint``: never shown and not itself the
    answer; ``solution()`` wins. Then across seeds: seeds matter, the answer is not printed,
    a second instance plays alike, the reward depends on the action and no probe wins on most
    seeds. Raises ContractError with the first failing check's reason code.
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
    run = _Run(factory, env, max_turns, max_observation_chars, kwargs, hint, check_solution)
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
