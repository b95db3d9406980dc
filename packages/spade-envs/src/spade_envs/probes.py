"""The reward-hack probe battery: small policies that play without understanding the game.

A designer that is rewarded for environments the agent can win is an optimizer against the
validator: an environment that any ``\\boxed{...}`` wins, or whose observation singles out the
answer, is free reward. A probe is a policy: it sees each observation and its own last action
and returns the next action (:data:`Policy`). :func:`probe_battery` builds one seed's probes;
every probe plays a whole episode on every seed the solution plays. The probes are
deterministic in the seed and the observations, so a verdict can be reproduced.

Deciding (:class:`ProbeTally`): each probe's wins over the seeds are tested twice.

* Against chance: the rate at which an honest game of the seed's shape can be won blindly,
  the largest of :data:`BASE_RATE`, ``1/k`` on a seed whose first observation shows ``k``
  labelled options, and twice the measured collision rate of the solution's answers over the
  seeds (a game whose answers repeat, such as a count from 2 to 8, is won by a constant now
  and then; that is chance, not a hack).
* Against the solution: a win is *unexplained* when the probe's answer differs from the
  answer ``solution()`` gives on that seed (one-step solutions; options compared by label
  and by text). An honest game accepts the right answer, so unexplained wins are held to
  :data:`UNEXPLAINED_RATE`.

The exact one-sided tail ``P(wins >= observed)`` of the (Poisson-)binomial is the p-value; a
probe is a reward hack (``probe_wins:<probe>``) when either is under :data:`ALPHA` divided by
the number of probes (Bonferroni). A p-value between that and :data:`BORDERLINE` is open: the
checker draws more seeds, up to a cap. A probe that could not be rejected even if it won on
every seed still to be played is settled: it stops playing (:meth:`ProbeTally.settled`).
"""

from __future__ import annotations

import math
import random
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .leaks import answer_of, as_number, normalise

__all__ = [
    "ALPHA",
    "BASE_RATE",
    "BORDERLINE",
    "COMMON_ANSWERS",
    "PROBE_NAMES",
    "UNEXPLAINED_RATE",
    "Policy",
    "ProbeTally",
    "open_loop_actions",
    "probe_battery",
    "same_answer",
    "tail_probability",
]

Transcript = list[tuple[str, str, float, bool, bool]]
#: A probe: ``(observation, its own last action or None) -> action``.
Policy = Callable[[str, str | None], str]

#: Chance of winning an honest game that shows no options, per episode. Generous on purpose:
#: a game with a few attempts at a small range is won by a blind guess now and then.
BASE_RATE = 0.05
#: The family-wise false-rejection rate over all probes of one environment.
ALPHA = 0.001
#: A p-value under this (and over ALPHA / probes) is borderline: more seeds are drawn.
BORDERLINE = 0.05
#: Chance of an unexplained win (a wrong answer accepted) in an honest game, per episode.
UNEXPLAINED_RATE = 0.01

_TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPTION = re.compile(r"^\s*\(?([A-Ha-h]|[1-9])[).:]\s+(\S[^\n]*)$", re.M)

#: Answers a lazy policy tries first; each is played boxed and bare.
COMMON_ANSWERS: tuple[str, ...] = (
    "0", "1", "2", "-1", "yes", "no", "true", "false", "A", "B", "C", "none", "unknown",
)  # fmt: skip

_WORDS = ("up", "down", "left", "right", "go", "stop", "open", "take", "north", "red", "x", "a")
_GARBAGE = ("hello?", "\\boxed{}", "\\boxed{", "}}{{", "\\boxed{\\boxed{1}}")
_NONFINITE = ("nan", "inf", "-inf", "NaN", "Infinity")
_PATTERNS = (".*", ".+", "\\d+", "[a-z]+", "*")
#: How many single positions the ``number_<i>`` probes try.
NUMBER_POSITIONS = 3


def boxed(text: str) -> str:
    return f"\\boxed{{{text}}}"


def observation_tokens(observation: str, limit: int = 12) -> list[str]:
    """The first ``limit`` distinct numbers and words of ``observation``, in order."""
    return list(dict.fromkeys(_TOKEN.findall(observation)))[:limit] or ["0"]


def shown_options(observation: str) -> list[str]:
    """The labels of the options an observation lists one per line (``A) …``, ``(b) …``,
    ``3. …``), in order; empty when fewer than two are shown."""
    labels = list(dict.fromkeys(label for label, _ in _OPTION.findall(observation)))
    return labels if len(labels) >= 2 else []


def _options(observation: str) -> dict[str, str]:
    """Label to option text, for the options an observation lists one per line."""
    found = {_norm(label): _norm(text) for label, text in _OPTION.findall(observation)}
    return found if len(found) >= 2 else {}


def _norm(text: str) -> str:
    """An answer compared loosely: unboxed, case and spaces dropped, a number by value (the
    leak rules' reading of an answer, :mod:`spade_envs.leaks`)."""
    out = normalise(answer_of(text)).rstrip(".")
    value = as_number(out)
    return out if value is None else repr(value)


def same_answer(action: str, solution: str, first_observation: str) -> bool:
    """Whether a probe's action gives the solution's one-step answer: equal after
    :func:`_norm`, or one names the option whose text the other gives."""
    a, b = _norm(action), _norm(solution)
    if a == b:
        return True
    options = _options(first_observation)
    return options.get(a) == b or options.get(b) == a


def _next_of(actions: Sequence[str], last: str | None) -> str:
    """The action after ``last`` in ``actions``, cycling (the first when ``last`` is not one)."""
    return actions[(actions.index(last) + 1) % len(actions)] if last in actions else actions[0]


def _cycle(actions: Sequence[str]) -> Policy:
    def policy(_obs: str, last: str | None) -> str:
        return _next_of(actions, last)

    _OPEN_LOOP.add(policy)
    return policy


#: The probes that never read the observation (their actions are known before the episode).
_OPEN_LOOP: weakref.WeakSet[Policy] = weakref.WeakSet()


def open_loop_actions(probe: Policy, turns: int) -> list[str] | None:
    """The ``turns`` actions a probe that never reads the observation takes, else None (the
    checker sends them in batches: ``spade_envs.play.play_fixed``)."""
    if probe not in _OPEN_LOOP:
        return None
    actions: list[str] = []
    for _ in range(turns):
        actions.append(probe("", actions[-1] if actions else None))
    return actions


def _pick(choose: Callable[[str], str | None], fallback: str = "0") -> Policy:
    def policy(obs: str, _last: str | None) -> str:
        chosen = choose(obs)
        return boxed(chosen if chosen is not None else fallback)

    return policy


def _at(items: Callable[[str], list[str]], index: int) -> Callable[[str], str | None]:
    def choose(obs: str) -> str | None:
        found = items(obs)
        return found[index] if -len(found) <= index < len(found) else None

    return choose


def _numbers(obs: str) -> list[str]:
    return _NUMBER.findall(obs)


def _several_boxes(obs: str, _last: str | None) -> str:
    """Many boxes in one reply: the observation's tokens, every integer below 1,000 and the
    common answers (a game that accepts any matching box is won by it)."""
    tokens = list(dict.fromkeys(observation_tokens(obs, 8)))
    rest = _FIXED_BOXED
    for token in tokens:  # each box once, where it first appears
        if token in _FIXED_BOXES:
            rest = rest.replace(boxed(token), "", 1)
    return "".join(boxed(t) for t in tokens) + rest


#: The answers every several-boxes reply holds after the observation's own tokens.
_FIXED_BOXES = dict.fromkeys([*(str(n) for n in range(1000)), *COMMON_ANSWERS])
_FIXED_BOXED = "".join(boxed(a) for a in _FIXED_BOXES)


def _echo_action(obs: str, last: str | None) -> str:
    return last if last is not None else boxed(observation_tokens(obs)[0])


def probe_battery(seed: int) -> list[tuple[str, Policy]]:
    """The probes for one seed, ``(name, policy)``, in the order they play (names: :data:`PROBE_NAMES`)."""
    rng = random.Random(f"spade-probe-{seed}")
    randoms = [
        boxed(str(rng.randint(-10, 100))) if rng.random() < 0.6 else rng.choice(_WORDS)
        for _ in range(8)
    ]
    numbers = [(f"number_{i + 1}", _pick(_at(_numbers, i))) for i in range(NUMBER_POSITIONS)]
    return [
        ("empty", _cycle([""])),
        ("empty_box", _cycle([boxed(""), boxed(" \n ")])),
        ("whitespace", _cycle([" \n\t "])),
        ("garbage", _cycle(_GARBAGE)),
        ("long", _cycle(["x" * 10_000])),
        ("short", _cycle(["a"])),
        ("common", _cycle([boxed(a) for a in COMMON_ANSWERS])),
        ("common_bare", _cycle(COMMON_ANSWERS)),
        ("first_option", _pick(_at(shown_options, 0), "A")),
        ("last_option", _pick(_at(shown_options, -1), "B")),
        ("first_number", _pick(_at(_numbers, 0))),
        ("last_number", _pick(_at(_numbers, -1))),
        *numbers[1:],
        ("echo_observation", lambda obs, _last: obs[:2000]),
        ("echo_action", _echo_action),
        ("several_boxes", _several_boxes),
        ("nonfinite", _cycle([boxed(x) for x in _NONFINITE])),
        ("pattern", _cycle([boxed(x) for x in _PATTERNS])),
        ("lengths", _cycle([boxed("7" * n) for n in range(1, 9)])),
        ("random", _cycle(randoms)),
        (
            "tokens",
            lambda obs, last: _next_of([boxed(t) for t in observation_tokens(obs)], last),
        ),
    ]


#: Every probe's name, in battery order.
PROBE_NAMES: tuple[str, ...] = tuple(name for name, _ in probe_battery(0))


def tail_probability(rates: Sequence[float], wins: int) -> float:
    """``P(X >= wins)`` for ``X`` a sum of independent Bernoulli(``rates[i]``) (exact, by the
    Poisson-binomial recursion; the binomial tail when all rates are equal)."""
    if wins <= 0:
        return 1.0
    dist = [1.0]
    for p in rates:
        dist = [
            (dist[k] if k < len(dist) else 0.0) * (1 - p) + (dist[k - 1] * p if k else 0.0)
            for k in range(len(dist) + 1)
        ]
    return math.fsum(dist[wins:])


@dataclass
class ProbeRecord:
    """One probe's seeds: the indices of the seeds it played, whether it won on each, and
    whether the win (if any) is unexplained (``None`` where the solution's answer is unknown:
    a solution of several moves)."""

    seeds: list[int] = field(default_factory=list)
    won: list[bool] = field(default_factory=list)
    unexplained: list[bool | None] = field(default_factory=list)

    @property
    def wins(self) -> int:
        return sum(self.won)


@dataclass
class ProbeTally:
    """Which probes won on which seeds, and whether the rewards ever depended on the action."""

    seeds: int = 0
    episodes: int = 0
    records: dict[str, ProbeRecord] = field(default_factory=dict)
    option_rates: list[float] = field(default_factory=list)
    """Per seed played, ``1/k`` for ``k`` shown options (else 0)."""
    answers: list[str | None] = field(default_factory=list)
    """Per seed played, the one-step solution's answer, normalised (None: unknown)."""
    same_rewards_every_seed: bool = True

    def add_seed(
        self,
        probes: Sequence[tuple[str, Transcript, bool]],
        solution: Transcript | None,
        first: str = "",
    ) -> None:
        """One seed's probe episodes ``(name, transcript, won)``, the solution's episode and
        the seed's first observation."""
        index = self.seeds
        self.seeds += 1
        options = shown_options(first)
        self.option_rates.append(1.0 / len(options) if options else 0.0)
        answer = solution[0][0] if solution is not None and len(solution) == 1 else None
        self.answers.append(_norm(answer) if answer is not None else None)
        for name, transcript, won in probes:
            self.episodes += 1
            rec = self.records.setdefault(name, ProbeRecord())
            rec.seeds.append(index)
            rec.won.append(won)
            explained = answer is None or not won or same_answer(transcript[-1][0], answer, first)
            rec.unexplained.append(None if answer is None else not explained)
        self._compare_rewards(probes, solution)

    def _compare_rewards(
        self, probes: Sequence[tuple[str, Transcript, bool]], solution: Transcript | None
    ) -> None:
        if solution is None:
            self.same_rewards_every_seed = False
            return
        target = [(r, t) for _, _, r, t, _ in solution]
        for _, transcript, _ in probes:
            got = [(r, t) for _, _, r, t, _ in transcript]
            n = min(len(got), len(target))
            if got[:n] != target[:n]:
                self.same_rewards_every_seed = False
                return

    @property
    def wins(self) -> dict[str, int]:
        """Each probe's won episodes."""
        return {name: rec.wins for name, rec in self.records.items()}

    @property
    def win_rate(self) -> float:
        """Won probe episodes over all probe episodes (0.0 when none were played)."""
        won = sum(rec.wins for rec in self.records.values())
        return round(won / self.episodes, 4) if self.episodes else 0.0

    def collision_rate(self) -> float:
        """How often two seeds' known solution answers are equal (pairs over all pairs)."""
        known = [a for a in self.answers if a is not None]
        pairs = len(known) * (len(known) - 1) // 2
        same = sum(1 for i, a in enumerate(known) for b in known[i + 1 :] if a == b)
        return same / pairs if pairs else 0.0

    def chance_rates(self) -> list[float]:
        """Per seed played, the rate at which an honest game of its shape is won blindly."""
        floor = max(BASE_RATE, min(1.0, 2 * self.collision_rate()))
        return [max(floor, rate) for rate in self.option_rates]

    def _p(self, rec: ProbeRecord, extra: int = 0) -> float:
        """The probe's p-value, as if it also won (unexplained) ``extra`` more seeds."""
        rates = self.chance_rates()
        top = max(rates, default=BASE_RATE)
        p_chance = tail_probability([rates[i] for i in rec.seeds] + [top] * extra, rec.wins + extra)
        judged = [u for u in rec.unexplained if u is not None]
        # Seeds to come count as judged only when some seed so far was: a game whose
        # solution takes several moves has no one answer to compare with, on any seed.
        extra_judged = extra if judged else 0
        p_unexplained = tail_probability(
            [UNEXPLAINED_RATE] * (len(judged) + extra_judged), sum(judged) + extra_judged
        )
        return min(p_chance, p_unexplained)

    def p_values(self) -> dict[str, float]:
        """Each probe's one-sided p-value: the chance of winning at least as often blindly."""
        return {name: self._p(rec) for name, rec in self.records.items()}

    @staticmethod
    def threshold() -> float:
        """The Bonferroni-corrected level under which a probe is rejected."""
        return ALPHA / len(PROBE_NAMES)

    def worst(self) -> tuple[str, int] | None:
        """The probe that wins significantly more often than chance, with its wins, if any."""
        p_values = self.p_values()
        if not p_values:
            return None
        name = min(p_values, key=lambda n: (p_values[n], -self.records[n].wins))
        return (name, self.records[name].wins) if p_values[name] < self.threshold() else None

    def borderline(self) -> bool:
        """Whether some probe's p-value is too low to accept and too high to reject."""
        p_values = self.p_values().values()
        return min(p_values, default=1.0) >= self.threshold() and min(p_values) < BORDERLINE

    def settled(self, name: str, seeds_left: int) -> bool:
        """Whether the probe stays accepted even if it won on each of ``seeds_left`` more
        seeds (so playing it on them cannot change the verdict)."""
        rec = self.records.get(name)
        if rec is None:
            return False
        return self._p(rec, seeds_left) >= self.threshold() and self._p(rec) >= BORDERLINE
