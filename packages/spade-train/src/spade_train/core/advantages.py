"""Group-relative advantages per role, then per-role normalization (step 5 of a cycle, docs/concepts.md).

GRPO: each reward minus its group's mean (designer groups = completions of one prompt; agent
groups = episodes of one environment), divided by the group's standard deviation when
``std_norm``. Per-role normalization then rescales each role's advantages to zero mean and
unit standard deviation, so a role whose rewards live on a larger scale cannot dominate the
joint update of the shared policy.

The agent's returns can instead be centered on a per-game exponential baseline
(:func:`ema_baseline_advantages`, upstream's default), and :func:`compact_filter` /
:func:`malformed_tool_call_turns` decide what of an episode is trained.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Protocol

import spade_envs as se
from spade_envs.plugins import Registry

from spade_train.core.learning_potential import GameBaselines
from spade_train.types import TrainSample


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
    rewards: Sequence[float],
    groups: Sequence[Hashable],
    roles: Sequence[str],
    cfg: AdvantageSettings,
) -> list[float]:
    """Group advantages, then per-role normalization when ``cfg.role_normalization``.

    Groups are made role-specific, so a designer group and an agent group never mix.
    """
    keyed = [(r, g) for r, g in zip(roles, groups, strict=True)]
    adv = group_advantages(rewards, keyed, std_norm=cfg.group_std_norm, eps=cfg.eps)
    if cfg.role_normalization:
        adv = normalize_per_role(adv, roles, eps=cfg.eps)
    return adv


# -- agent returns: the per-game baseline variants ---------------------------------------------


def ema_baseline_advantages(
    returns: Sequence[float], games: Sequence[str], baselines: GameBaselines
) -> list[float]:
    """Each return minus its game's exponential average of past mean returns, then that
    average takes this batch's mean return of the game (once per game per call; a game not
    seen before has baseline 0). ``baselines`` is the run's :class:`GameBaselines`."""
    if len(returns) != len(games):
        raise ValueError(f"{len(returns)} returns but {len(games)} game labels")
    before = {g: baselines.get(g) for g in set(games)}
    out = [float(r) - before[g] for r, g in zip(returns, games, strict=True)]
    for g in dict.fromkeys(games):  # first-seen order, so the updates replay identically
        values = [float(r) for r, gg in zip(returns, games, strict=True) if gg == g]
        baselines.update(g, sum(values) / len(values))
    return out


class AdvantageSettings(Protocol):
    """The fields of :class:`spade_train.config.AdvantageConfig` read here."""

    @property
    def agent(self) -> str: ...
    @property
    def group_std_norm(self) -> bool: ...
    @property
    def eps(self) -> float: ...
    @property
    def role_normalization(self) -> bool: ...


AgentAdvantage = Callable[
    [Sequence[float], Sequence[str], AdvantageSettings, GameBaselines | None], list[float]
]
"""``fn(returns, games, settings, baselines) -> advantages``: an agent advantage estimator."""


def _grpo(
    returns: Sequence[float],
    games: Sequence[str],
    cfg: AdvantageSettings,
    baselines: GameBaselines | None,
) -> list[float]:
    return group_advantages(returns, games, std_norm=cfg.group_std_norm, eps=cfg.eps)


def _ema_baseline(
    returns: Sequence[float],
    games: Sequence[str],
    cfg: AdvantageSettings,
    baselines: GameBaselines | None,
) -> list[float]:
    if baselines is None:
        raise ValueError("advantage.agent=ema-baseline needs the run's GameBaselines")
    return ema_baseline_advantages(returns, games, baselines)


AGENT_ADVANTAGES: Registry[AgentAdvantage] = Registry(
    "agent advantage estimator", entry_points="spade_train.agent_advantages"
)
"""The agent's advantage estimators by name (``advantage.agent``; spade-envs' one registry):
``grpo`` (per-game z-score, the paper launchers) and ``ema-baseline`` (upstream's default)."""
AGENT_ADVANTAGES.register("grpo", _grpo)
AGENT_ADVANTAGES.register("ema-baseline", _ema_baseline)


def agent_advantages(
    returns: Sequence[float],
    games: Sequence[str],
    cfg: AdvantageSettings,
    baselines: GameBaselines | None = None,
) -> list[float]:
    """The agent's advantages under ``cfg.agent`` (``grpo``: per-game z-score;
    ``ema-baseline``: :func:`ema_baseline_advantages`, which needs ``baselines``)."""
    return AGENT_ADVANTAGES.get(cfg.agent)(returns, games, cfg, baselines)


# -- loss masks ---------------------------------------------------------------------------------


def zero_loss_mask(samples: Sequence[TrainSample]) -> list[TrainSample]:
    """Copies of ``samples`` that train nothing (loss mask all 0)."""
    return [replace(s, loss_mask=[0] * len(s.loss_mask)) for s in samples]


def compact_filter(samples: Sequence[TrainSample], truncated: bool) -> list[TrainSample]:
    """An episode cut off by the turn limit trains nothing (its samples keep their place in
    the batch, loss mask zeroed): running out of turns is the budget, not a policy failure."""
    return zero_loss_mask(samples) if truncated else list(samples)


def malformed_tool_call_turns(turns: Sequence[se.TurnRecord]) -> list[bool]:
    """Per agent turn (spade-envs ``TurnRecord``): True when the reply tried a tool call
    (``<tool_call>`` in it) but no call could be parsed and it was not a final answer."""
    return [
        t.parse_outcome is not None
        and t.parse_outcome not in ("tool_calls", "final_answer")
        and "<tool_call>" in t.reply
        for t in turns
    ]
