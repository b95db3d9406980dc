"""The reward-hack probe battery: actions a policy could try without understanding the game.

A designer that is rewarded for environments the agent can win is an optimizer against the
validator: an environment that any ``\\boxed{...}`` wins, or whose first observation prints the
answer, is free reward. :func:`probe_battery` builds, from one seed's first observation, the
probe episodes the checker plays; :class:`ProbeTally` counts which probes won on which seeds
and decides when winning is too easy. The probes are deterministic in the seed, so a verdict
can be reproduced.

Thresholds (measured on the 60 example games and the 30 tool-use environments, none of which
any probe wins on more than one seed in five): a probe that wins on more than half of the seeds
is a reward hack (``probe_wins``); an environment where every probe gets exactly the rewards
the solution gets, on every seed, ignores the action (``reward_ignores_action``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["COMMON_ANSWERS", "ProbeTally", "probe_battery"]

Transcript = list[tuple[str, str, float, bool, bool]]

_TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z]+")

#: Answers a lazy policy tries first; each is played boxed and bare.
COMMON_ANSWERS: tuple[str, ...] = (
    "0", "1", "2", "-1", "yes", "no", "true", "false", "A", "B", "C", "none", "unknown",
)  # fmt: skip

_WORDS = ("up", "down", "left", "right", "go", "stop", "open", "take", "north", "red", "x", "a")


def observation_tokens(observation: str, limit: int = 12) -> list[str]:
    """The first ``limit`` distinct numbers and words of ``observation``, in order.

    (A leaked answer further on is the checker's ``solution_leaked``; trying every number of
    the observation would also win easy, honest games that offer several attempts.)"""
    return list(dict.fromkeys(_TOKEN.findall(observation)))[:limit] or ["0"]


def probe_battery(first_observation: str, seed: int) -> list[tuple[str, list[str]]]:
    """The probe episodes for one seed: ``(name, actions)``, actions cycled each turn.

    ``empty`` (nothing), ``garbage`` (malformed and empty boxes), ``long`` (10,000 characters),
    ``common`` (common answers), ``random`` (random numbers and words drawn from the seed) and,
    last, ``tokens`` (the first numbers and words of the first observation, boxed)."""
    rng = random.Random(f"spade-probe-{seed}")
    randoms = [
        f"\\boxed{{{rng.randint(-10, 100)}}}" if rng.random() < 0.6 else rng.choice(_WORDS)
        for _ in range(8)
    ]
    return [
        ("empty", [""]),
        ("garbage", ["hello?", "\\boxed{}", "\\boxed{", "}}{{", "\\boxed{\\boxed{1}}"]),
        ("long", ["x" * 10_000]),
        ("common", [f"\\boxed{{{a}}}" for a in COMMON_ANSWERS] + list(COMMON_ANSWERS)),
        ("random", randoms),
        ("tokens", [f"\\boxed{{{t}}}" for t in observation_tokens(first_observation)]),
    ]


@dataclass
class ProbeTally:
    """Which probes won on which seeds, and whether the rewards ever depended on the action."""

    seeds: int = 0
    episodes: int = 0
    wins: dict[str, int] = field(default_factory=dict)
    same_rewards_every_seed: bool = True

    def add_seed(
        self, probes: Sequence[tuple[str, Transcript, bool]], solution: Transcript | None
    ) -> None:
        """One seed's probe episodes ``(name, transcript, won)`` and the solution's episode."""
        self.seeds += 1
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

    def worst(self) -> tuple[str, int] | None:
        """The probe that won on the most seeds, if it won on more than half of them."""
        if not self.wins:
            return None
        name, won = max(self.wins.items(), key=lambda item: item[1])
        return (name, won) if won * 2 > self.seeds else None
