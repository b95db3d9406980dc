"""The reward contract's rules over whole episodes (the environment contract, "Rewards").

Per step, a reward is a finite float inside ``REWARD_BOUNDS`` (checked as each step is played)
and a step after the end earns 0.0 (checked after the solution's episode). Over an episode,
checked here on every probe episode and the solution's, seed by seed:

* ``total_out_of_range``: the rewards of one episode sum outside ``REWARD_BOUNDS``; a game
  that pays 0.3 for every wrong guess is farmed by guessing until the turns run out.
* ``malformed_paid``: a malformed reply (nothing, an empty box, whitespace, garbage, 10,000
  characters) earns a positive reward on some step, more than a wrong answer earns on some
  step of the same seed (the agent would learn to reply badly rather than guess).
* ``lost_pays_as_won``: a lost episode's rewards sum to at least the solution's won episode's,
  so the return does not tell winning from losing.
"""

from __future__ import annotations

from collections.abc import Sequence

from .core import REWARD_BOUNDS

__all__ = ["CONTRACT_REASONS", "MALFORMED_PROBES", "contract_breach"]

Transcript = list[tuple[str, str, float, bool, bool]]

#: The probes whose every reply is malformed.
MALFORMED_PROBES = frozenset({"empty", "empty_box", "whitespace", "garbage", "long"})
#: The reason codes :func:`contract_breach` names (with the ``reward_contract:`` prefix).
CONTRACT_REASONS: tuple[str, ...] = (
    "reward_contract:total_out_of_range",
    "reward_contract:lost_pays_as_won",
    "reward_contract:malformed_paid",
)


def _total(transcript: Transcript) -> float:
    return sum(step[2] for step in transcript)


def contract_breach(
    probes: Sequence[tuple[str, Transcript, bool]], solution: Transcript | None
) -> tuple[str, str, str] | None:
    """The first rule one seed's episodes break, as ``(rule, episode, message)`` (``episode``
    is the probe's name or ``"solution"``), or None when they keep the contract."""
    low, high = REWARD_BOUNDS
    episodes = [*((n, t) for n, t, _ in probes), *([("solution", solution)] if solution else [])]
    for name, transcript in episodes:
        total = _total(transcript)
        if not low <= total <= high:
            return (
                "total_out_of_range",
                name,
                f"the {name!r} episode's rewards sum to {total:g}, outside [{low:g}, {high:g}]; pay the outcome once, not per step",
            )
    lost = [(n, t) for n, t, w in probes if not w]
    if solution is not None:
        won_total = _total(solution)
        for name, transcript in lost:
            if _total(transcript) >= won_total:
                return (
                    "lost_pays_as_won",
                    name,
                    f"the lost {name!r} episode earned {_total(transcript):g}, as much as the won solution's {won_total:g}; a loss must earn less than a win",
                )
    wrong = [r for n, t in lost if n not in MALFORMED_PROBES for _, _, r, _, _ in t]
    if wrong:
        worst_wrong = min(wrong)
        for name, transcript in lost:
            paid = max((step[2] for step in transcript), default=0.0)
            if name in MALFORMED_PROBES and paid > max(0.0, worst_wrong):
                return (
                    "malformed_paid",
                    name,
                    f"the malformed {name!r} reply earned {paid:g} on a step, more than a wrong answer ({worst_wrong:g}); reward a malformed reply 0",
                )
    return None
