"""The contract checker: plays an environment with probe actions and its own solution.

:func:`check_env` raises :class:`~spade_envs.errors.ContractError` with a stable reason code and
a message that says how to fix the problem; it returns a :class:`CheckReport` when every check
passes. The corpus validator (spade-corpus) calls it instead of re-implementing the checks.
The checks themselves are named functions in :mod:`spade_envs.checks` (``CHECKS``).
Exceptions raised by the environment are wrapped in a ContractError whose ``__cause__`` is the
original exception (for a sandboxed environment, a spade-sandbox error with its own reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .checks import CHECKS, CheckRun, SeedPlay
from .core import DEFAULT_MAX_TURNS, MAX_OBSERVATION_CHARS, EnvFactory, TextEnvironment
from .play import (
    check_step_result,
    close_quietly,
    fail,
    play_actions,
    solution_actions,
)
from .probes import PROBE_NAMES
from .seeding import more_seeds

__all__ = [
    "CheckReport",
    "check_env",
    "check_step_result",
    "play_actions",
    "solution_actions",
]


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
    "reward_contract:after_end": "a step after the won episode ended got a reward other than 0.0",
    "reward_contract:total_out_of_range": "one episode's rewards sum outside REWARD_BOUNDS",
    "reward_contract:malformed_paid": "a malformed reply earned more than a wrong answer",
    "reward_contract:lost_pays_as_won": "a lost episode earned as much as the won solution",
    "hint_empty": "the hint is empty",
    "hint_leaked": "the hint text appears in an observation",
    "hint_is_answer": "playing the hint as an action wins the episode",
    "close_raised": "close() raised",
    "solution_leaked": "the final action of solution() appears in the first observation of every seed",
    "reward_ignores_action": "every probe action got the solution's rewards on every seed",
    "infeasible": "on most seeds only solution() can win: the answer depends on randomness the observations never show and the replies never narrow (twins of a reset that look alike need different answers)",
    "probe_wins": "a probe policy wins significantly more often than an honest game of its shape allows (the probe is named after the colon)",
    **{
        f"probe_wins:{name}": f"the {name!r} probe wins significantly more often than chance"
        for name in PROBE_NAMES
    },
}


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
    feasible_bound: float | None = None
    """The mean, over the seeds the twin analysis judged, of the best win rate an agent that
    sees only the observations can reach (1.0: the winning information reaches it on every
    seed); None when no seed was judged (see ``feasibility_not_judged``)."""
    privileged_only_seeds: int = 0
    """Seeds judged on which only solution() wins (bound below 0.5)."""
    feasibility_seeds: int = 0
    """Seeds the twin analysis judged (more than ``seeds`` when some were privileged-only)."""
    feasibility_not_judged: dict[str, int] = field(default_factory=dict)
    """Why seeds were not judged: "untraced" (randomness outside Python's ``random``),
    "raised" (the environment raised in a twin) or "budget" (out of time) -> how many."""


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
    max_seeds: int = 20,
) -> CheckReport:
    """Check that ``factory`` builds environments that follow the contract.

    Runs :data:`CHECKS` in order: per seed, reset types, sizes and characters; the probe
    battery (:func:`spade_envs.probes.probe_battery`), whose episodes must end within
    ``max_turns``; determinism under the seed; with ``hint``: never shown and not itself the
    answer; ``solution()`` wins. Then across seeds: seeds matter, the answer is not printed,
    a second instance plays alike, the reward depends on the action, the reward contract holds
    over every episode and no probe wins significantly more often than chance. Raises ContractError with the first failing check's reason code.

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
        raise fail(
            "construct_failed",
            f"constructing with max_turns={max_turns} raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    if hint is not None and not hint.strip():
        close_quietly(env)
        raise fail("hint_empty", "the hint is empty; write one or two sentences of strategy")

    run = CheckRun(factory, env, max_turns, max_observation_chars, kwargs, hint, check_solution)
    run.reuse_resets = reuse_resets
    try:
        _run_checks(run, list(seeds), max_seeds)
    except BaseException:
        close_quietly(env)
        raise
    _close_checked(env)
    return _report(run)


def _close_checked(env: TextEnvironment) -> None:
    """Close ``env``; ``close_raised`` when its ``close()`` raises. A sandboxed environment's
    close ignores the environment's errors, so its ``close()`` is first run by name."""
    by_name = getattr(env, "_close_error", None)
    try:
        error = by_name() if callable(by_name) else None
    except BaseException:
        close_quietly(env)
        raise
    if error is not None:
        close_quietly(env)
        raise fail("close_raised", f"close() raised {error}; release resources without raising")
    try:
        env.close()
    except Exception as exc:
        raise fail("close_raised", f"close() raised {type(exc).__name__}: {exc}", exc) from exc


def _run_checks(run: CheckRun, todo: list[int], max_seeds: int) -> None:
    """The per-seed checks on each seed (more seeds while the probes are borderline, up to
    ``max_seeds``), then the checks across seeds."""
    while todo:
        played = SeedPlay(todo.pop(0))
        run.seeds_left = len(todo)
        for _, per_seed, check, _ in CHECKS:
            if per_seed:
                check(run, played)
        run.played.append(played)
        run.tally.add_seed(played.probes, played.solution_play, played.first)
        # Borderline probe statistics: more seeds (drawn from those played), up to max_seeds.
        if not todo and run.tally.borderline() and len(run.played) < max_seeds:
            todo = more_seeds([s.seed for s in run.played], 1)
    for _, per_seed, check, _ in CHECKS:
        if not per_seed:
            check(run)


def _report(run: CheckRun) -> CheckReport:
    return CheckReport(
        tuple(s.seed for s in run.played),
        run.tally.episodes,
        run.steps,
        max((len(s.solution_play or []) for s in run.played), default=0),
        max(len(s.first) for s in run.played),
        [t for s in run.played for _, t, _ in s.probes],
        probe_win_rate=run.tally.win_rate,
        probe_wins=dict(run.tally.wins),
        **_feasibility_fields(run),
    )


def _feasibility_fields(run: CheckRun) -> dict[str, Any]:
    f = run.feasibility
    if f is None:
        return {}
    return {
        "feasible_bound": f.mean_bound,
        "privileged_only_seeds": len(f.privileged),
        "feasibility_seeds": len(f.bounds),
        "feasibility_not_judged": dict(f.not_judged),
    }
