"""The named checks of :func:`spade_envs.check_env`, in the shape of Gymnasium's ``env_checker``.

Each check is a small function over one seed's play (``SeedPlay``) or over the whole run
(``CheckRun``) that raises :class:`~spade_envs.errors.ContractError` with a stable reason code and
a message saying how to fix the problem; :data:`CHECKS` lists them in the order they run, each
with the reason codes it can raise.
"""

from __future__ import annotations

from collections.abc import Callable

from .check_run import (
    CheckRun,
    SeedPlay,
    first_key,
    from_kept,
    last_key,
    play_again,
    probe_on,
    real_reset,
    real_reset_info,
    replay_on,
    reset_again,
)
from .errors import ContractError, Evidence
from .feasibility import judge
from .leaks import leak_evidence, views_of
from .play import (
    Transcript,
    check_step_result,
    checked_reset,
    close_quietly,
    fail,
    replayed,
    solution_actions,
    won,
)
from .probes import PROBE_NAMES, Policy, probe_battery
from .reward_contract import CONTRACT_REASONS, contract_breach
from .seeding import more_seeds

__all__ = ["CHECKS", "CheckRun", "SeedPlay"]


def check_reset(run: CheckRun, s: SeedPlay) -> None:
    """Reset returns (str, dict) of the right size and characters (the probes repeat it)."""
    s.first, s.first_info = real_reset_info(run, s.seed, first_key(s.seed))


def check_probe_episodes(run: CheckRun, s: SeedPlay) -> None:
    """Every probe episode ends within max_turns and every reset of the seed looks the same."""
    everything = probe_battery(s.seed)
    # A settled probe cannot change the verdict; the first and last always play (sentinels:
    # a game free on some seeds, and the real reset after the other episodes).
    battery = [
        (name, probe)
        for i, (name, probe) in enumerate(everything)
        if i in (0, len(everything) - 1) or not run.tally.settled(name, run.seeds_left + 1)
    ]
    played: dict[tuple[str, ...], tuple[str, str, float, bool, bool]] = {}
    for index, (name, probe) in enumerate(battery):
        known = None if index in (0, len(battery) - 1) else replayed(probe, s.first, played)
        if known is not None:  # the same actions as an earlier probe's whole episode
            again, transcript = s.first, known
        else:
            again, transcript = _probe_episode(run, s, probe, index, len(battery))
            for turn in range(len(transcript)):
                played[tuple(step[0] for step in transcript[: turn + 1])] = transcript[turn]
        if again != s.first:
            raise fail(
                "nondeterministic",
                f"reset(seed={s.seed}) twice gave different observations; draw randomness only from random.Random(seed)",
            )
        last = transcript[-1]
        if not (last[3] or last[4]):
            raise fail(
                "no_termination",
                f"seed={s.seed}: a probe episode ran {run.max_turns} steps without terminated or truncated; truncate at max_turns",
            )
        run.steps += len(transcript)
        s.probes.append((name, transcript, won(transcript)))


def _probe_episode(
    run: CheckRun, s: SeedPlay, probe: Policy, index: int, count: int
) -> tuple[str, Transcript]:
    """The ``index``-th of ``count`` probes' episode and the reset it started from: the first
    plays on from check_reset's reset, the last after a real reset that follows the others'
    episodes, the rest from a copy of the seed's reset."""
    if index == 0:
        return s.first, probe_on(run, s.seed, probe, s.first)
    if index == count - 1:
        again = real_reset(run, s.seed, last_key(s.seed))
        return again, probe_on(run, s.seed, probe, again)
    play = lambda first, key: probe_on(run, s.seed, probe, first, restore=key)  # noqa: E731
    return from_kept(run, s.seed, first_key(s.seed), play)


def check_replay(run: CheckRun, s: SeedPlay) -> None:
    """The same seed and actions give the same transcript again in the same instance."""
    transcript = s.probes[-1][1]
    replay = lambda _obs, key: replay_on(run.env, run, s.seed, transcript, key)  # noqa: E731
    _, again = from_kept(run, s.seed, first_key(s.seed), replay)
    if again != transcript:
        raise fail(
            "nondeterministic",
            f"seed={s.seed}: replaying the same actions gave a different transcript; keep all state in the instance and seed it in reset",
        )


def check_hint(run: CheckRun, s: SeedPlay) -> None:
    """The hint is never shown (in any probe observation); whether it wins is recorded."""
    if run.hint is None:
        return
    hint = run.hint.strip()
    for obs in [s.first, *(o for _, t, _ in s.probes for _, o, *_ in t)]:
        if hint in obs:
            raise fail(
                "hint_leaked",
                f"seed={s.seed}: the hint text appears in an observation; the hint must be privileged",
                evidence=Evidence.of("hint", s.seed, obs, hint),
            )
    _, hinted = play_again(run, s.seed, [run.hint])
    # On a seed that an empty reply also wins, the game gives everything away: that is the
    # probes' finding (probe_wins), not the hint's.
    free = any(w for n, _, w in s.probes if n == "empty")
    if won(hinted) and run.hint_won is None and not free:
        run.hint_won = s.seed
        run.hint_won_obs = hinted[-1][1]  # reported by check_hint_not_answer, later


def check_hint_not_answer(run: CheckRun) -> None:
    """The hint, played as an action, wins on no seed."""
    if run.hint_won is not None:
        raise fail(
            "hint_is_answer",
            f"seed={run.hint_won}: the hint played as an action wins; the hint must help, not answer",
            evidence=Evidence.of("hint", run.hint_won, run.hint_won_obs),
        )


def check_solution(run: CheckRun, s: SeedPlay) -> None:
    """solution() returns the same non-empty actions after every reset, and they win."""
    if not run.check_solution:
        return
    env, seed = run.env, s.seed
    reset_again(run, seed, last_key(seed))  # a copy of the last probe's real reset
    try:
        text = env.solution()
    except Exception as exc:
        raise fail(
            "solution_raised",
            f"solution() after reset(seed={seed}) raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    if not isinstance(text, str) or not solution_actions(text):
        raise fail(
            "solution_type",
            f"solution() after reset(seed={seed}) returned {text!r}; return the winning actions, one per line",
        )
    # A real reset: what the first call left behind and reset keeps shows in the second.
    checked_reset(env, seed, run.max_chars)
    if env.solution() != text:
        raise fail(
            "nondeterministic",
            f"solution() after reset(seed={seed}) differs between two resets; draw randomness only from random.Random(seed)",
        )
    _, played = play_again(run, seed, solution_actions(text))
    if not won(played) or len(played) > len(solution_actions(text)):
        # Two equal solutions can be luck in an unseeded game: a failed play is the game's
        # nondeterminism when more resets of the same seed disagree about the solution.
        for _ in range(3):
            checked_reset(env, seed, run.max_chars)
            if env.solution() != text:
                raise fail(
                    "nondeterministic",
                    f"solution() after reset(seed={seed}) differs between resets; draw randomness only from random.Random(seed)",
                )
        last = played[-1][1] if played else ""
        raise fail(
            "solution_fails",
            f"seed={seed}: playing solution() did not win within {run.max_turns} turns; fix solution() or the win check",
            evidence=Evidence.of("solution", seed, f"{text.strip()} -> {last}"),
        )
    _check_no_reward_after_end(run, seed, played)
    s.solution_text, s.solution_play = text, played


def _check_no_reward_after_end(run: CheckRun, seed: int, played: Transcript) -> None:
    """The reward contract's first rule: one more step after the won episode ended gets
    reward 0.0 (the contract's "stepping after the episode ended returns reward 0.0")."""
    action = played[-1][0]
    try:
        result = run.env.step(action)
    except Exception as exc:
        raise fail(
            "step_raised",
            f"seed={seed}: a step after the episode ended raised {type(exc).__name__}: {exc}; return reward 0.0 and terminated=True",
            exc,
        ) from exc
    check_step_result(result, f"a step after the end (seed={seed})", run.max_chars)
    if result[1] != 0.0:
        raise fail(
            "reward_contract:after_end",
            f"seed={seed}: a step after the won episode ended got reward {result[1]}; after the end return reward 0.0 and terminated=True",
            evidence=Evidence.of("solution", seed, f"{action[:60]} (again) -> {result[0]}"),
        )


def check_seeds_matter(run: CheckRun) -> None:
    """Not every seed gives the same episode (observations, probe replies and solution)."""
    # The random probe's actions are drawn from the seed itself, so it is left out; settled
    # probes stop playing, so only the probes every seed played are compared.
    common = set.intersection(*({n for n, _, _ in s.probes} for s in run.played)) - {"random"}
    prints = [
        [s.first, [t for n, t, _ in s.probes if n in common], s.solution_text] for s in run.played
    ]
    if len(prints) > 1 and all(p == prints[0] for p in prints):
        seeds = [s.seed for s in run.played]
        raise fail(
            "seed_ignored",
            f"seeds {seeds} all gave identical episodes (observations, probe replies and solution); build the episode from random.Random(seed)",
        )


def check_solution_not_shown(run: CheckRun) -> None:
    """The solution's answer is not singled out, in any normalised form, in what the agent
    reads on most seeds (see :mod:`spade_envs.leaks`)."""
    if not run.check_solution:
        return
    infos = {s.seed: s.first_info for s in run.played}

    def restart(seed: int) -> dict:  # a copy of check_reset's reset, as play_again starts
        reset_again(run, seed, first_key(seed))
        return infos[seed]

    shown = leak_evidence(views_of(run.played, run.env, restart))
    if shown is not None:
        raise fail("solution_leaked", shown[0], evidence=shown[1])


def check_determinism_across_instances(run: CheckRun) -> None:
    """A second instance (for a sandboxed factory: a second worker) replays the first seed's
    probe alike and gives every seed's solution again.

    Catches episodes salted by ``id(self)``, the process or anything else outside the seed."""
    s = run.played[0]
    transcript = s.probes[-1][1]
    try:
        other = run.factory(max_turns=run.max_turns, **run.kwargs)
    except Exception as exc:
        raise fail(
            "construct_failed",
            f"constructing a second instance raised {type(exc).__name__}: {exc}",
            exc,
        ) from exc
    try:
        first = checked_reset(other, s.seed, run.max_chars)
        again = replay_on(other, run, s.seed, transcript)
        same = first == s.first and again == transcript
        # Every seed's solution too: one seed's answer can coincide by chance.
        for played in run.played if same else ():
            if played.solution_text is not None:
                checked_reset(other, played.seed, run.max_chars)
                if other.solution() != played.solution_text:
                    same = False
                    break
    except ContractError:
        raise
    except Exception as exc:
        raise fail(
            "nondeterministic",
            f"seed={s.seed}: a second instance raised {type(exc).__name__}: {exc} where the first did not",
            exc,
        ) from exc
    finally:
        close_quietly(other)
    if not same:
        raise fail(
            "nondeterministic",
            f"seed={s.seed}: a second instance played the same seed differently; derive every choice from the seed, never from id(), the process or the clock",
        )


def check_reward_uses_action(run: CheckRun) -> None:
    """Some action gets a different reward than the solution's on some seed."""
    if run.check_solution and run.tally.same_rewards_every_seed:
        raise fail(
            "reward_ignores_action",
            "every probe action got exactly the rewards of solution() on every seed; compute the reward from the action",
        )


def check_reward_contract(run: CheckRun) -> None:
    """The reward contract over every episode played: an episode's rewards sum inside
    REWARD_BOUNDS, a malformed reply never earns more than a wrong answer, and a lost episode
    never earns as much as the solution's won one (see :mod:`spade_envs.reward_contract`)."""
    for s in run.played:
        broken = contract_breach(s.probes, s.solution_play)
        if broken is not None:
            rule, probe, message = broken
            transcript = next(t for n, t, _ in s.probes if n == probe)
            excerpt = " | ".join(f"{a[:30]!r} -> {r}" for a, _, r, _, _ in transcript[:4])
            raise fail(
                f"reward_contract:{rule}",
                f"seed={s.seed}: {message}",
                evidence=Evidence.of(probe, s.seed, excerpt),
            )


def check_probes_lose(run: CheckRun) -> None:
    """No probe wins significantly more often than chance or than the solution's answer
    explains (:class:`spade_envs.probes.ProbeTally`)."""
    worst = run.tally.worst()
    if worst is not None:
        name, wins = worst
        seed, transcript = next(
            (s.seed, t) for s in run.played for n, t, w in s.probes if n == name and w
        )
        action, obs = transcript[-1][0], transcript[-1][1]
        raise fail(
            f"probe_wins:{name}",
            f"the {name!r} probe won on {wins} of {run.tally.seeds} seeds (p={run.tally.p_values()[name]:.2g} against chance) without solving anything; check the answer exactly and do not reveal it",
            evidence=Evidence.of(name, seed, f"{action[:60]} -> {obs}"),
        )


def check_feasible(run: CheckRun) -> None:
    """An agent that sees only the observations can win on most seeds, not only solution()
    (:mod:`spade_envs.feasibility`: the indistinguishable twins of each seed's reset)."""
    if not run.check_solution:
        return
    played = [(s.seed, _wrong_probe_actions(s)) for s in run.played]
    make = lambda: run.factory(max_turns=run.max_turns, **run.kwargs)  # noqa: E731
    run.feasibility = judge(run.env, make, played, run.max_turns, more_seeds)
    if run.feasibility.infeasible:
        message, evidence = run.feasibility.message()
        raise fail("infeasible", message, evidence=evidence)


def _wrong_probe_actions(s: SeedPlay) -> list[str]:
    """The distinct first actions of the probes that lost on the seed (at most six)."""
    actions: list[str] = []
    for _, transcript, won_it in s.probes:
        if transcript and not won_it and transcript[0][0] not in actions:
            actions.append(transcript[0][0])
    return actions[:6]


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
        (
            "solution_raised",
            "solution_type",
            "solution_fails",
            "nondeterministic",
            "reward_contract:after_end",
        ),
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
    ("reward_contract", False, check_reward_contract, CONTRACT_REASONS),
    ("probes_lose", False, check_probes_lose, tuple(f"probe_wins:{n}" for n in PROBE_NAMES)),
    ("feasible", False, check_feasible, ("infeasible",)),
)
