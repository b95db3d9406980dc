"""Rewards of both roles.

The agent's reward is the episode return. The designer's reward for one completion is computed
from what became of its environment (:class:`EnvOutcome`):

- ``regret`` (the paper): hint-based regret ``mean(R_hint) - mean(R_nohint)``;
- ``blend`` (the released launchers): ``0.6 * plateau(win rate without hint) +
  0.4 * max(0, regret) / 0.15``, where the plateau is 1 inside ``[0.4, 0.6]`` and falls
  linearly to 0 at win rates 0 and 1 (weights, band and scale come from the recipe);
- ``solve-rate`` (the ``no-hint-regret`` ablation): the win rate without the hint.

Invalid environments get ``invalid_penalty`` and ones that timed out in validation
``timeout_penalty``. :func:`center_per_skill` subtracts each skill's mean, and
:class:`DelayedRewards` holds designer items back for ``k`` cycles.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class RewardSettings(Protocol):
    """The fields of :class:`spade_train.config.RewardConfig` used here."""

    designer: str
    invalid_penalty: float
    timeout_penalty: float
    plateau_low: float
    plateau_high: float
    regret_scale: float
    blend_plateau_weight: float
    blend_regret_weight: float


@dataclass(frozen=True)
class EnvOutcome:
    """What one designer completion produced: validity and, if valid, the returns of the
    hinted and unhinted episodes the agent played in it."""

    valid: bool
    reason: str | None = None
    hinted_returns: Sequence[float] = field(default_factory=tuple)
    unhinted_returns: Sequence[float] = field(default_factory=tuple)
    skill: str | None = None
    timed_out: bool = False


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def regret(hinted: Sequence[float], unhinted: Sequence[float]) -> float:
    """Hint-based regret ``mean(R_hint) - mean(R_nohint)`` (0 when either side is empty)."""
    if not hinted or not unhinted:
        return 0.0
    return _mean(hinted) - _mean(unhinted)


def win_rate(returns: Sequence[float], threshold: float = 1.0) -> float:
    """Fraction of episodes whose return reached ``threshold`` (a win)."""
    return _mean([float(r >= threshold) for r in returns])


def plateau(rate: float, low: float = 0.4, high: float = 0.6) -> float:
    """1 inside ``[low, high]``, falling linearly to 0 at 0 and at 1."""
    if low <= rate <= high:
        return 1.0
    if rate < low:
        return max(0.0, rate / low) if low > 0 else 0.0
    return max(0.0, (1.0 - rate) / (1.0 - high)) if high < 1 else 0.0


def designer_reward(outcome: EnvOutcome, cfg: RewardSettings) -> float:
    """The designer's scalar reward for one completion under the recipe's reward settings."""
    if not outcome.valid:
        return float(cfg.timeout_penalty if outcome.timed_out else cfg.invalid_penalty)
    hinted, unhinted = list(outcome.hinted_returns), list(outcome.unhinted_returns)
    if cfg.designer == "regret":
        return regret(hinted, unhinted)
    if cfg.designer == "solve-rate":
        return win_rate(unhinted)
    if cfg.designer == "blend":
        flat = plateau(win_rate(unhinted), cfg.plateau_low, cfg.plateau_high)
        gain = max(0.0, regret(hinted, unhinted)) / cfg.regret_scale
        return cfg.blend_plateau_weight * flat + cfg.blend_regret_weight * gain
    raise ValueError(f"unknown designer reward {cfg.designer!r}; use regret, blend or solve-rate")


def center_per_skill(rewards: Sequence[float], skills: Sequence[str]) -> list[float]:
    """Each reward minus the mean reward of its skill in this batch."""
    if len(rewards) != len(skills):
        raise ValueError(f"{len(rewards)} rewards but {len(skills)} skills")
    by_skill: dict[str, list[float]] = defaultdict(list)
    for r, s in zip(rewards, skills, strict=True):
        by_skill[s].append(r)
    means = {s: _mean(v) for s, v in by_skill.items()}
    return [r - means[s] for r, s in zip(rewards, skills, strict=True)]


class DelayedRewards:
    """A queue that releases items pushed at cycle ``c`` at cycle ``c + delay``.

    With ``delay=0`` :meth:`pop_ready` returns what was just pushed. Items must be
    JSON-serializable (they are checkpointed with :meth:`state_dict`).
    """

    def __init__(self, delay: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.delay = delay
        self._queue: list[tuple[int, list[dict[str, Any]]]] = []

    def push(self, cycle: int, items: Sequence[dict[str, Any]]) -> None:
        self._queue.append((int(cycle), list(items)))

    def pop_ready(self, cycle: int) -> list[dict[str, Any]]:
        """All items pushed at cycles ``<= cycle - delay``, oldest first, removed."""
        ready, waiting = [], []
        for pushed, items in self._queue:
            (ready if pushed + self.delay <= cycle else waiting).append((pushed, items))
        self._queue = waiting
        return [item for _, items in ready for item in items]

    def __len__(self) -> int:
        return sum(len(items) for _, items in self._queue)

    def state_dict(self) -> dict[str, Any]:
        return {"delay": self.delay, "queue": [[c, items] for c, items in self._queue]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.delay = int(state["delay"])
        self._queue = [(int(c), list(items)) for c, items in state["queue"]]
