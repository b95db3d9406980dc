"""Group-relative advantages per role, then per-role normalization (DESIGN.md step 5).

GRPO: each reward minus its group's mean (designer groups = completions of one prompt; agent
groups = episodes of one environment), divided by the group's standard deviation when
``std_norm``. Per-role normalization then rescales each role's advantages to zero mean and
unit standard deviation, so a role whose rewards live on a larger scale cannot dominate the
joint update of the shared policy.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any


def group_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], std_norm: bool = True, eps: float = 1e-6
) -> list[float]:
    """Reward minus its group mean (over group std when ``std_norm``); singleton or
    zero-variance groups give 0."""
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group labels")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        values = [float(rewards[i]) for i in idx]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if len(idx) < 2 or std < eps:
            continue
        for i, v in zip(idx, values, strict=True):
            out[i] = (v - mean) / (std + eps) if std_norm else v - mean
    return out


def normalize_per_role(
    advantages: Sequence[float], roles: Sequence[str], eps: float = 1e-6
) -> list[float]:
    """Each role's advantages shifted to zero mean and scaled to unit standard deviation."""
    if len(advantages) != len(roles):
        raise ValueError(f"{len(advantages)} advantages but {len(roles)} roles")
    out = [float(a) for a in advantages]
    for role in set(roles):
        idx = [i for i, r in enumerate(roles) if r == role]
        values = [out[i] for i in idx]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        for i in idx:
            out[i] = 0.0 if std < eps else (out[i] - mean) / std
    return out


def compute_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], roles: Sequence[str], cfg: Any
) -> list[float]:
    """Group advantages, then per-role normalization when ``cfg.role_normalization``.

    Groups are made role-specific, so a designer group and an agent group never mix.
    """
    keyed = [(r, g) for r, g in zip(roles, groups, strict=True)]
    adv = group_advantages(rewards, keyed, std_norm=cfg.group_std_norm, eps=cfg.eps)
    if cfg.role_normalization:
        adv = normalize_per_role(adv, roles, eps=cfg.eps)
    return adv
