"""Steps 4–6: rewards of both roles, group-relative advantages over the joint batch, the
update; then the cycle's plays are recorded in the pool and the environment memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import spade_corpus as sc

from spade_train.config import RunConfig
from spade_train.core import advantages as adv
from spade_train.core import rewards as rw
from spade_train.core.pool import EnvPool, measured_difficulty
from spade_train.play import samples_from_generations
from spade_train.steps.records import Batch, Design, Episode, PlayedEnv, Scored, Scores
from spade_train.types import TrainSample


def score(
    cfg: RunConfig,
    cycle: int,
    designs: Sequence[Design],
    played: Sequence[PlayedEnv],
    episodes: Sequence[Episode],
    delayed: rw.DelayedRewards,
) -> Scores:
    """Step 4: the agent's reward is the episode return; the designer's comes from what became
    of its environment (the recipe's ``reward.designer``), released after ``delay_cycles``."""
    agent = [
        Scored(
            "agent",
            (played[e.env_index].entry.env_id, e.hinted),
            e.result.episode_return,
            e.samples,
        )
        for e in episodes
    ]
    by_id = {p.entry.env_id: p for p in played}
    rewards, skills, regrets = [], [], []
    for d in designs:
        p = by_id.get(d.env_id or "") if d.valid else None
        outcome = rw.EnvOutcome(
            valid=p is not None,
            reason=d.reason,
            hinted_returns=p.hinted if p else [],
            unhinted_returns=p.unhinted if p else [],
            skill=d.skill,
            timed_out=bool(d.reason and "timeout" in d.reason),
        )
        if p is not None:
            regrets.append(rw.regret(p.hinted, p.unhinted))
        reward = rw.designer_reward(outcome, cfg.reward)
        if d.repaired_turn is not None:  # the trained first reply failed; a repair fixed it
            reward = cfg.designer.pipeline.repaired_reward
        if d.judged_invalid:
            reward += cfg.designer.pipeline.self_judge.penalty
        rewards.append(reward)
        skills.append(d.skill if p is not None else None)
    if cfg.reward.per_skill_centering and rewards:
        rewards = _center_valid(rewards, skills)
    now = [
        Scored(
            "designer",
            (cycle, d.prompt_index),
            r,
            samples_from_generations([d.generation], 0.0, "designer", {"cycle": cycle}),
        )
        for d, r in zip(designs, rewards, strict=True)
    ]
    delayed.push(cycle, [s.to_json() for s in now])
    ready = [Scored.from_json(item) for item in delayed.pop_ready(cycle)]
    if not cfg.designer.train:  # designer.train=false: designs are played, never trained
        ready = []
    return Scores(agent, ready, rewards, regrets)


def _center_valid(rewards: list[float], skills: list[str | None]) -> list[float]:
    """Per-skill centering over the valid environments (invalid ones keep their penalty)."""
    valid = [i for i, s in enumerate(skills) if s is not None]
    centered = rw.center_per_skill([rewards[i] for i in valid], [skills[i] or "" for i in valid])
    out = list(rewards)
    for i, value in zip(valid, centered, strict=True):
        out[i] = value
    return out


def advantage(cfg: RunConfig, items: Sequence[Scored]) -> Batch:
    """Step 5: group-relative advantages per role, then per-role normalization."""
    values = (
        adv.compute_advantages(
            [s.reward for s in items],
            [s.group for s in items],
            [s.role for s in items],
            cfg.advantage,
        )
        if items
        else []
    )
    samples: list[TrainSample] = []
    per_role: dict[Any, list[float]] = {"agent": [], "designer": []}
    for item, a in zip(items, values, strict=True):
        samples += [s.with_advantage(a) for s in item.samples]
        per_role[item.role].append(a)
    return Batch(samples, per_role)


def update(backend: Any, batch: Batch, progress: Any, cycle: int) -> dict[str, float]:
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
    curriculum: Any,
) -> None:
    """The cycle's returns enter the pool's running statistics, the environment memory (this
    cycle's difficulty and regret) and the procedural curriculum."""
    for p in played:
        pool.record(p.entry.env_id, p.hinted, p.unhinted, cycle)
        win, regret = measured_difficulty(p.hinted, p.unhinted)
        entry = sc.MemoryEntry(
            env_id=p.entry.env_id,
            skill=p.entry.skill,
            code_excerpt=sc.code_excerpt(p.entry.source),
            win_rate=win,
            regret=regret,
            cycle=cycle,
            hint=p.entry.hint,
        )
        if p.entry.env_id in memory:
            memory.update(entry.env_id, win_rate=entry.win_rate, regret=entry.regret, cycle=cycle)
        else:
            memory.add(entry)
        if curriculum is not None:
            curriculum.update(p.entry.origin, win)
