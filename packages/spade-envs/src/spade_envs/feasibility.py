"""Feasibility without privilege: can an agent that sees only the observations win?

``solution()`` reads the environment's state; an agent reads only what the environment shows.
A game whose answer is drawn in ``reset`` after the question, never shown and never narrowed
by the replies, is won by ``solution()`` on every seed and by no agent: it must not enter the
pool as a frontier game. The test, per seed, is the *indistinguishable twins* analysis of
``spade_sandbox.analyse_twins`` (in a sandboxed environment's worker, one call per seed):
replay ``reset`` with one of its random draws changed; twins that look the same, need
different answers and get the same replies to the same wrong guesses leave an observation-only
agent one fixed sequence of guesses, whose best share of the twins bounds its win rate.

A seed whose bound is below :data:`PRIVILEGED_BELOW` is *privileged-only*; when such seeds are
more than half of the seeds judged, the game is ``infeasible``. Seeds are judged one at a time
until the verdict is certain (a clean majority of the checker's seeds settles it); a game with
a privileged-only seed is judged on more seeds (up to :data:`FEASIBILITY_SEEDS`), as the probes
are when borderline. Randomness the analysis cannot trace (numpy, ``os.urandom``, ``secrets``,
the clock, helpers in other modules) leaves a seed not judged, which the report records.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import Evidence
from .play import fail

__all__ = ["FEASIBILITY_SEEDS", "PRIVILEGED_BELOW", "Feasibility", "twins_of"]

PRIVILEGED_BELOW = 0.5
"""A seed whose observation-only win-rate bound is below this is privileged-only."""
FEASIBILITY_SEEDS = 40
"""The most seeds judged when some of the checker's seeds are privileged-only."""
SPREAD_FIRST, SPREAD_NEXT = 4, 2
"""Twins of the first seed judged (the last two draws, the first, one between) and of the
others (the last two draws: where an answer drawn after the question sits)."""
BUDGET_S = 2.0
"""Time for one seed's analysis (a sandboxed call also stays within half its wall limit)."""


@dataclass
class Feasibility:
    """The twin analysis over the seeds judged: per seed its bound, or why it was not judged."""

    bounds: dict[int, float] = field(default_factory=dict)
    """Seed -> the best win rate of an observation-only agent (1.0: the information shows)."""
    not_judged: dict[str, int] = field(default_factory=dict)
    """Outcome ("untraced", "raised", "budget") -> seeds."""
    evidence: dict[int, str] = field(default_factory=dict)
    """Seed -> a wrong guess and the reply every twin gave (privileged-only seeds)."""

    def add(self, seed: int, result: dict) -> None:
        outcome = str(result.get("outcome"))
        bound = result.get("bound")
        if outcome != "judged" or not isinstance(bound, (int, float)) or not 0 <= bound <= 1:
            key = outcome if outcome != "judged" else "bad_result"
            self.not_judged[key] = self.not_judged.get(key, 0) + 1
            return
        self.bounds[seed] = float(bound)
        if bound < PRIVILEGED_BELOW:
            self.evidence[seed] = str(result.get("evidence", ""))

    @property
    def privileged(self) -> list[int]:
        """The privileged-only seeds, in the order judged."""
        return [s for s, b in self.bounds.items() if b < PRIVILEGED_BELOW]

    @property
    def mean_bound(self) -> float | None:
        """The mean bound over the seeds judged (None when none was)."""
        return sum(self.bounds.values()) / len(self.bounds) if self.bounds else None

    def decided(self, planned: int) -> bool:
        """Whether the verdict over ``planned`` seeds is already certain."""
        priv, judged = len(self.privileged), len(self.bounds)
        return priv * 2 > planned or (judged - priv) * 2 >= planned

    @property
    def infeasible(self) -> bool:
        return len(self.privileged) * 2 > len(self.bounds)

    def message(self) -> tuple[str, Evidence]:
        """The one-line rejection and the first privileged-only seed's evidence."""
        seeds = self.privileged
        worst = max(self.bounds[s] for s in seeds)
        named = ", ".join(str(s) for s in seeds[:4]) + (", ..." if len(seeds) > 4 else "")
        text = (
            f"on {len(seeds)} of {len(self.bounds)} seeds judged ({named}) solution() wins, but "
            f"an agent that sees only the observations wins at most {worst:.0%} (reset draws "
            "the answer after what it shows, and wrong guesses get the same replies whatever it "
            "is); show what the answer depends on, or reply to guesses in a way that narrows it"
        )
        return text, Evidence.of("twins", seeds[0], self.evidence.get(seeds[0], ""))


def _in_process(
    make: Callable[[], Any], seed: int, turns: int, probes: list[str], spread: int
) -> dict:
    try:
        sandbox = importlib.import_module("spade_sandbox")
    except ImportError:
        return {"outcome": "untraced", "message": "spade-sandbox is not installed"}
    try:
        scratch = make()
    except Exception as exc:
        return {"outcome": "raised", "message": f"constructing: {type(exc).__name__}: {exc}"}
    try:
        return dict(
            sandbox.analyse_twins(scratch, seed, probes, turns, budget_s=BUDGET_S, spread=spread)
        )
    finally:
        try:
            scratch.close()
        except Exception:
            pass  # the contract's close check is check_env's own


def twins_of(
    env: Any,
    make: Callable[[], Any],
    seed: int,
    turns: int,
    probes: Sequence[str],
    spread: int = 4,
) -> dict:
    """One seed's twin analysis: in the worker of a sandboxed environment (its ``_twins``), or
    in this process on a scratch instance from ``make``. What the environment raises in a twin
    is the outcome "raised"; a call the sandbox stopped (timeout, crash, memory) is a
    ContractError ``infeasible`` whose cause is the sandbox's error, as for any other check's
    call (the corpus validator reports the sandbox's reason)."""
    remote = getattr(env, "_twins", None)
    if not callable(remote):
        return _in_process(make, seed, turns, list(probes), spread)
    try:
        return dict(remote(seed, turns, list(probes), BUDGET_S, spread))
    except Exception as exc:
        raise fail(
            "infeasible",
            f"seed={seed}: the twin analysis (reset replayed with one random draw changed) ended with {type(exc).__name__}: {exc}; reset must finish for every draw",
            exc,
        ) from exc


def judge(
    env: Any,
    make: Callable[[], Any],
    played: Sequence[tuple[int, Sequence[str]]],
    turns: int,
    more: Callable[[list[int], int], list[int]],
) -> Feasibility:
    """The twin analysis of the played ``(seed, probe actions)``, one seed at a time until the
    verdict over them is certain (three clean seeds of five settle it); once some seed is
    privileged-only, of further seeds from ``more(seeds, n)`` until the verdict over
    :data:`FEASIBILITY_SEEDS` seeds is certain."""
    result = Feasibility()
    probes = list(played[0][1]) if played else []
    planned = len(played)
    for index, (seed, actions) in enumerate(played):
        spread = SPREAD_NEXT if index else SPREAD_FIRST
        result.add(seed, twins_of(env, make, seed, turns, actions, spread))
        planned = max(FEASIBILITY_SEEDS, len(played)) if result.privileged else planned
        if result.decided(planned):
            return result
    seeds = [s for s, _ in played]
    for seed in more(seeds, planned - len(seeds)) if result.privileged else []:
        result.add(seed, twins_of(env, make, seed, turns, probes, SPREAD_NEXT))
        if result.decided(planned):
            break
    return result
