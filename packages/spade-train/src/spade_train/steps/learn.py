"""Steps 4–6: rewards of both roles, group-relative advantages over the joint batch, the
update; then the cycle's plays are recorded in the pool and the environment memory."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Protocol, cast

import spade_corpus as sc

from spade_train.backends.base import PolicyBackend
from spade_train.config import RunConfig
from spade_train.core import advantages as adv
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedDesignerRewards
from spade_train.core.learning_potential import GameBaselines
from spade_train.core.pool import EnvPool, PoolEntry, measured_difficulty
from spade_train.play import samples_from_generations
from spade_train.resources import Progress
from spade_train.steps.records import Batch, Episode, PlayedEnv, Scored, Scores, Validated
from spade_train.types import JSON, Role, TrainSample


class PlayObserver(Protocol):
    """What learns from the cycle's plays besides the pool and the memory (an environment
    source's curriculum): each environment's unhinted returns, in play order."""

    def observe(self, entry: PoolEntry, returns: Sequence[float]) -> None: ...


def score(
    cfg: RunConfig,
    cycle: int,
    slots: Sequence[Validated],
    played: Sequence[PlayedEnv],
    episodes: Sequence[Episode],
    delayed: DelayedDesignerRewards,
    reward_state: rw.RewardState,
) -> Scores:
    """Step 4: the agent's reward is the episode return (trained episodes only); the
    designer's comes from what became of its environment under ``reward.designer``, scored
    when released: ``delay_cycles`` later, over its environment's plays in that window (all
    pending items at the last cycle)."""
    trained = [e for e in episodes if e.trained]
    agent = [
        Scored(
            "agent",
            (played[e.env_index].entry.env_id, e.hinted),
            e.result.episode_return,
            e.samples,
        )
        for e in trained
    ]
    outcomes, payloads, regrets = designer_items(cfg, cycle, slots, played)
    delayed.push(cycle, outcomes, payloads)
    delayed.record_plays(cycle, {p.entry.env_id: p.unhinted for p in played})
    if cycle >= cfg.cycles:
        released = delayed.flush(cfg.reward, reward_state, len(trained))
    else:
        released = delayed.pop_ready(cycle, cfg.reward, reward_state, len(trained))
    ready = [
        dataclasses.replace(Scored.from_json(payload), reward=_final(cfg, payload, r))
        for payload, r in zip(released.payloads, released.rewards, strict=True)
        if r is not None  # masked by the variant: not trained
    ]
    if not cfg.designer.train:  # designer.train=false: designs are played, never trained
        ready = []
    metrics = dict(released.scores.metrics) if released.scores else {}
    metrics["designer/released"] = len(released.payloads)
    metrics["designer/masked"] = sum(r is None for r in released.rewards)
    return Scores(agent, ready, [s.reward for s in ready], regrets, metrics)


def designer_items(
    cfg: RunConfig, cycle: int, slots: Sequence[Validated], played: Sequence[PlayedEnv]
) -> tuple[list[rw.EnvOutcome], list[dict[str, JSON]], list[float]]:
    """Each designer slot's outcome, its training payload (queued until its reward is
    released) and, for the slots that were played, their regret."""
    by_id = {p.entry.env_id: p for p in played}
    outcomes, payloads, regrets = [], [], []
    for s in slots:
        p = by_id.get(s.env_id or "") if s.valid else None
        outcomes.append(
            rw.EnvOutcome(
                valid=p is not None,
                reason=s.reason,
                first_turn_valid=s.verdict.repaired_turn is None,
                hinted_returns=tuple(p.hinted) if p else (),
                unhinted_returns=tuple(p.unhinted) if p else (),
                skill=s.skill,
                timed_out=bool(s.reason and "timeout" in s.reason),
                step_timeout=bool(p and p.step_timeout),
                env_id=s.env_id,
                parsed=s.parsed,
                copy_of=s.verdict.copy_of,
            )
        )
        if p is not None:
            regrets.append(rw.regret(p.hinted, p.unhinted))
        samples = samples_from_generations([s.design.generation], 0.0, "designer", {"cycle": cycle})
        payload = Scored("designer", (cycle, s.design.prompt_index), 0.0, samples).to_json()
        payload["repaired"] = s.verdict.repaired_turn is not None  # the trained reply failed
        judged = s.verdict.judged_invalid
        payload["penalty"] = cfg.designer.pipeline.self_judge.penalty if judged else 0.0
        payloads.append(payload)
    return outcomes, payloads, regrets


def _final(cfg: RunConfig, payload: Mapping[str, JSON], reward: float) -> float:
    """A released designer reward after the pipeline's adjustments: a design that needed a
    repair turn earns ``repaired_reward`` (upstream: 0), a self-judged "no" adds its penalty."""
    pipeline = cfg.designer.pipeline
    value = pipeline.repaired_reward if payload.get("repaired") else float(reward)
    return value + float(cast(float, payload.get("penalty", 0.0)))


def advantage(cfg: RunConfig, items: Sequence[Scored], baselines: GameBaselines) -> Batch:
    """Step 5: the agent's advantages per game (``advantage.agent``: z-score or EMA baseline),
    the designer's per prompt group, then per-role normalization over the joint batch."""
    a = cfg.advantage
    agents = [s for s in items if s.role == "agent"]
    designers = [s for s in items if s.role == "designer"]
    games = ["|".join(str(g) for g in s.group) for s in agents]
    values = adv.agent_advantages([s.reward for s in agents], games, a, baselines) if agents else []
    if designers:
        rewards, groups = [s.reward for s in designers], [s.group for s in designers]
        values += adv.group_advantages(rewards, groups, std_norm=a.group_std_norm, eps=a.eps)
    ordered = agents + designers
    roles = [s.role for s in ordered]
    if a.role_normalization and values:
        values = adv.normalize_per_role(values, roles, eps=a.eps)
    samples: list[TrainSample] = []
    per_role: dict[Role, list[float]] = {"agent": [], "designer": []}
    for item, value in zip(ordered, values, strict=True):
        samples += [s.with_advantage(value) for s in item.samples]
        per_role[item.role].append(value)
    return Batch(samples, per_role)


def update(
    backend: PolicyBackend, batch: Batch, progress: Progress, cycle: int
) -> dict[str, float]:
    """Step 6: one GRPO/PPO-clip step over the joint batch, then the new weights published."""
    task = progress.add_task(f"cycle {cycle}: update", total=1)
    metrics: dict[str, float] = {}
    if batch.samples:
        metrics = backend.train_step(batch.samples)
        backend.publish_weights()
    progress.update(task, completed=1)
    return metrics


def record_plays(
    played: Sequence[PlayedEnv],
    cycle: int,
    pool: EnvPool,
    memory: sc.EnvironmentMemory,
    observer: PlayObserver,
    *,
    remember: bool = True,
) -> None:
    """The cycle's returns enter the pool's running statistics, the environment source (its
    curriculum) and the environment memory (this cycle's difficulty and regret;
    ``remember=False`` between designer rounds, where upstream leaves its memory alone)."""
    for p in played:
        pool.record(p.entry.env_id, p.hinted, p.unhinted, cycle)
        observer.observe(p.entry, p.unhinted)
        if not remember:
            continue
        win, regret = measured_difficulty(p.hinted, p.unhinted)
        entry = sc.MemoryEntry(
            env_id=p.entry.env_id,
            skill=p.entry.skill,
            code_excerpt=sc.code_excerpt(p.entry.source),
            win_rate=win,
            regret=regret,
            cycle=cycle,
            hint=p.entry.hint or "",
        )
        if p.entry.env_id in memory:
            memory.update(entry.env_id, win_rate=entry.win_rate, regret=entry.regret, cycle=cycle)
        else:
            memory.add(entry)
