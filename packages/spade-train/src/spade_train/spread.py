"""How much signal each role's rewards carry before any normalization.

Per-role normalization rescales each role's advantages to unit standard deviation, so the
spread of the *normalized* advantages is 1 (or 0) by construction and says nothing. What does
say something is measured here, on the rewards the advantage step starts from:

* ``adv/<role>_reward_std`` — the standard deviation of the role's raw rewards in the cycle;
* ``adv/<role>_groups`` — how many advantage groups the role had (designer: one per prompt;
  agent: one per game);
* ``adv/<role>_flat_groups`` — the share of those groups whose rewards were all equal (a single
  member included): GRPO gives every sample of such a group an advantage of 0, so it trains
  nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Protocol

__all__ = ["reward_spread"]


class _Item(Protocol):
    """A scored item of the joint batch (``steps.records.Scored``), read only."""

    @property
    def role(self) -> str: ...
    @property
    def group(self) -> tuple[Hashable, ...]: ...
    @property
    def reward(self) -> float: ...


def reward_spread(items: Sequence[_Item]) -> dict[str, float | int | None]:
    """The three measures above for both roles (None where a role had no item)."""
    out: dict[str, float | int | None] = {}
    for role in ("agent", "designer"):
        mine = [i for i in items if i.role == role]
        groups: dict[Hashable, list[float]] = defaultdict(list)
        for item in mine:
            groups[item.group].append(float(item.reward))
        rewards = [float(i.reward) for i in mine]
        flat = [g for g in groups.values() if max(g) - min(g) < 1e-9]
        out[f"adv/{role}_reward_std"] = _std(rewards)
        out[f"adv/{role}_groups"] = len(groups)
        out[f"adv/{role}_flat_groups"] = len(flat) / len(groups) if groups else None
    return out


def _std(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
