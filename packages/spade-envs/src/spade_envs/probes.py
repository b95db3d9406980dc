"""The reward-hack probe battery: small policies that play without understanding the game.

A designer that is rewarded for environments the agent can win is an optimizer against the
validator: an environment that any ``\\boxed{...}`` wins, or whose observation singles out the
answer, is free reward. A probe is a policy: it sees each observation and its own last action
and returns the next action (:data:`Policy`). :func:`probe_battery` builds one seed's probes;
every probe plays a whole episode on every seed the solution plays. The probes are
deterministic in the seed and the observations, so a verdict can be reproduced.

Deciding (:class:`ProbeTally`): a probe's wins over the seeds are compared with the rate at
which an honest game of that shape can be won by chance: ``1/k`` on a seed whose first
observation shows ``k`` labelled options (``A) …``, ``2. …``), else :data:`BASE_RATE`. The
exact one-sided tail ``P(wins >= observed)`` of that (Poisson-)binomial is the probe's p-value;
a probe is a reward hack (``probe_wins:<probe>``) when its p-value is under :data:`ALPHA`
divided by the number of probes (Bonferroni). A p-value between that and
:data:`BORDERLINE` is open: the checker draws more seeds, up to a cap.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ALPHA",
    "BASE_RATE",
    "BORDERLINE",
    "COMMON_ANSWERS",
    "PROBE_NAMES",
    "Policy",
    "ProbeTally",
    "chance_rate",
    "probe_battery",
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

_TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPTION = re.compile(r"^\s*\(?([A-Ha-h]|[1-9])[).:]\s+\S", re.M)

#: Answers a lazy policy tries first; each is played boxed and bare.
COMMON_ANSWERS: tuple[str, ...] = (
    "0", "1", "2", "-1", "yes", "no", "true", "false", "A", "B", "C", "none", "unknown",
)  # fmt: skip

_WORDS = ("up", "down", "left", "right", "go", "stop", "open", "take", "north", "red", "x", "a")
_GARBAGE = ("hello?", "\\boxed{}", "\\boxed{", "}}{{", "\\boxed{\\boxed{1}}")
_NONFINITE = ("nan", "inf", "-inf", "NaN", "Infinity")
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
    labels = list(dict.fromkeys(_OPTION.findall(observation)))
    return labels if len(labels) >= 2 else []


def chance_rate(observation: str) -> float:
    """The rate at which a blind policy wins an honest game showing ``observation`` first."""
    options = shown_options(observation)
    return max(1.0 / len(options), BASE_RATE) if options else BASE_RATE


def _cycle(actions: Sequence[str]) -> Policy:
    def policy(_obs: str, last: str | None) -> str:
        return actions[(actions.index(last) + 1) % len(actions)] if last in actions else actions[0]

    return policy


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
    answers = [*observation_tokens(obs, 8), *(str(n) for n in range(10)), *COMMON_ANSWERS]
    return "".join(boxed(a) for a in dict.fromkeys(answers))


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
        ("random", _cycle(randoms)),
        (
            "tokens",
            lambda obs, last: _cycle([boxed(t) for t in observation_tokens(obs)])(obs, last),
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
class ProbeTally:
    """Which probes won on which seeds, and whether the rewards ever depended on the action."""

    seeds: int = 0
    episodes: int = 0
    wins: dict[str, int] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)
    """Per seed, the chance rate of an honest game of that seed's shape."""
    same_rewards_every_seed: bool = True

    def add_seed(
        self,
        probes: Sequence[tuple[str, Transcript, bool]],
        solution: Transcript | None,
        rate: float = BASE_RATE,
    ) -> None:
        """One seed's probe episodes ``(name, transcript, won)``, the solution's episode and
        the seed's chance rate (:func:`chance_rate`)."""
        self.seeds += 1
        self.rates.append(rate)
        for name, _, won in probes:
            self.episodes += 1
            self.wins[name] = self.wins.get(name, 0) + int(won)
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
    def win_rate(self) -> float:
        """Won probe episodes over all probe episodes (0.0 when none were played)."""
        return round(sum(self.wins.values()) / self.episodes, 4) if self.episodes else 0.0

    def p_values(self) -> dict[str, float]:
        """Each probe's one-sided p-value: the chance of winning at least as often blindly."""
        return {name: tail_probability(self.rates, won) for name, won in self.wins.items()}

    def _lowest(self) -> tuple[str, float] | None:
        p_values = self.p_values()
        if not p_values:
            return None
        name = min(p_values, key=lambda n: (p_values[n], -self.wins[n]))
        return name, p_values[name]

    def worst(self) -> tuple[str, int] | None:
        """The probe that wins significantly more often than chance, with its wins, if any."""
        lowest = self._lowest()
        if lowest is None or lowest[1] >= ALPHA / max(len(self.wins), 1):
            return None
        return lowest[0], self.wins[lowest[0]]

    def borderline(self) -> bool:
        """Whether some probe's p-value is too low to accept and too high to reject."""
        lowest = self._lowest()
        return lowest is not None and lowest[1] < BORDERLINE and self.worst() is None
