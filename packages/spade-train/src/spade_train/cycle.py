"""One cycle of SPADE as the six steps of the documentation's concepts page, each a function of
:mod:`spade_train.steps`:

1. design — the designer writes environments (:func:`steps.design.design`; the baselines'
   environment sources draw theirs instead: :mod:`spade_train.sources`)
2. validate — the sandbox and the pipeline's gates judge them; the valid new ones enter the
   pool (:func:`steps.validate.validate`)
3. play — the agent plays each chosen environment with and without its hint
4. score — agent reward = episode return; designer reward from its environment's outcome
5. advantage — group-relative per role, then per-role normalization, over the joint batch
6. update — one GRPO/PPO-clip step on the shared policy

then the plays are recorded in the pool, the environment memory and the environment source.
:func:`run_cycle` runs them in order and returns the cycle's metrics row and its batch;
:class:`~spade_train.resources.Resources` is what the steps use, :class:`RunState` what a
checkpoint saves, :class:`~spade_train.sources.EnvSource` where the environments come from.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import spade_corpus as sc

from spade_train.config import RunConfig
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedDesignerRewards
from spade_train.core.learning_potential import GameBaselines
from spade_train.core.pool import WIN_THRESHOLD, EnvPool
from spade_train.resources import Resources
from spade_train.sources import Clock, CycleInputs, EnvSource, write_design_rows
from spade_train.spread import reward_spread
from spade_train.steps import learn as s_learn
from spade_train.steps import play as s_play
from spade_train.steps import validate as s_validate
from spade_train.steps.records import Batch, Episode, PlayedEnv, Scores
from spade_train.types import JSON, Metrics, TrainSample


@dataclass
class RunState:
    """What a checkpoint saves besides the policy: the counters, the RNG, the pool, the memory,
    the delayed designer rewards and the environment source's own state (its curriculum)."""

    cycle: int
    rng: random.Random
    pool: EnvPool
    memory: sc.EnvironmentMemory
    delayed: DelayedDesignerRewards
    reward_state: rw.RewardState
    """The designer reward's per-skill learning-potential trackers."""
    baselines: GameBaselines
    """Per-game EMA of mean returns (``advantage.agent: ema-baseline``)."""
    source: EnvSource
    """Where the cycle's environments come from (``mode``)."""


def initial_state(cfg: RunConfig, source: EnvSource) -> RunState:
    """A new run's state: empty pool and memory, the RNG seeded, the mode's source."""
    pool = EnvPool(
        capacity=cfg.pool.capacity,
        retire_win_rate=cfg.pool.retire_win_rate,
        min_plays=cfg.pool.min_plays,
        sampling=cfg.pool.sampling,
        seed=cfg.seed,
    )
    memory = sc.EnvironmentMemory(
        capacity=cfg.designer.memory.capacity, band=cfg.designer.memory.band
    )
    r = cfg.reward
    return RunState(
        0,
        random.Random(cfg.seed),
        pool,
        memory,
        DelayedDesignerRewards(r.delay_cycles),
        rw.RewardState(r.lp_gamma_fast, r.lp_gamma_slow),
        GameBaselines(cfg.advantage.game_baseline_decay),
        source,
    )


RngState = tuple[int, tuple[int, ...], float | None]
"""``random.Random.getstate()``."""


def rng_to_json(state: RngState) -> list[JSON]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def rng_from_json(data: Sequence[JSON]) -> RngState:
    version, internal, gauss = data
    return (cast(int, version), tuple(cast("list[int]", internal)), cast("float | None", gauss))


def run_cycle(
    res: Resources, state: RunState, cycle: int, *, train: bool = True
) -> tuple[Metrics, list[TrainSample]]:
    """One cycle; returns its metrics row and its batch. ``train=False`` (overlap mode) leaves
    the update to the caller, who runs it beside the next cycle."""
    cfg, source, clock = res.cfg, state.source, Clock()
    row: Metrics = {"cycle": cycle}
    proposal = source.propose(CycleInputs(res, cycle, state.pool, state.memory, clock))  # 1-2
    row.update(proposal.metrics)
    hinted = s_play.hint_plays(cfg, source.measures_regret)
    between = 0 if proposal.between else hinted  # between designer rounds nothing reads them
    playing = s_play.Playing(cfg, res.backend, source.opener(res), res.run, res.progress, between)
    with clock.timed("play_s"):  # 3. play
        chosen = proposal.new_envs or proposal.replay  # between designer rounds: the last round's
        envs = s_play.choose_envs(cfg, chosen, state.pool, state.rng, from_pool=source.plays_pool)
        played, episodes = s_play.play(playing, envs, cycle)
    row.update(play_metrics(played, episodes))
    judging = s_validate.Judging(cfg, res.backend, cycle, res.validator, res.sandbox_config)
    slots, judged = s_validate.self_judge(judging, proposal.slots, played, episodes)
    if judged:  # the verdicts join the design rows
        row.update(judged)
        write_design_rows(res, cycle, slots)
    scores = s_learn.score(  # 4. score
        cfg, cycle, slots, played, episodes, state.delayed, state.reward_state
    )
    row.update(score_metrics(scores))
    batch = s_learn.advantage(cfg, scores.agent + scores.designer, state.baselines)  # 5.
    row.update(advantage_metrics(batch))
    row.update(reward_spread(scores.agent + scores.designer))  # the raw rewards' signal
    if train:  # 6. update
        with clock.timed("update_s"):
            metrics = s_learn.update(res.backend, batch, res.progress, cycle)
        row.update({f"train/{k}": v for k, v in metrics.items()})
    row["train/samples"] = len(batch.samples)
    s_learn.record_plays(
        played, cycle, state.pool, state.memory, source, remember=not proposal.between
    )
    retired = state.pool.retire_saturated()
    row.update(pool_metrics(state, len(proposal.new_envs), len(retired)))
    if cfg.eval.heldout and cycle % cfg.eval.heldout_every == 0:
        with clock.timed("heldout_s"):  # never trained: how the agent does on unseen games
            held_hinted = hinted if cfg.eval.heldout_hints else 0
            heldout = dataclasses.replace(playing, opener=res.sandboxed, hinted_per_env=held_hinted)
            row.update(s_play.play_heldout(heldout, cycle))
    row.update(source.metrics())
    row.update({f"time/{k}": round(v, 3) for k, v in clock.times.items()})
    row["time/cycle_s"] = round(time.perf_counter() - clock.started, 3)
    return row, batch.samples


def play_metrics(played: Sequence[PlayedEnv], episodes: Sequence[Episode]) -> Metrics:
    hinted = [r for p in played for r in p.hinted]
    unhinted = [r for p in played for r in p.unhinted]
    turns = [t for e in episodes for t in e.result.turns]
    ended = Counter(s_play.episode_end(e.result) for e in episodes)
    return {
        "play/envs": len(played),
        "play/episodes": len(hinted) + len(unhinted),
        "play/return_hint": _mean(hinted),
        "play/return_nohint": _mean(unhinted),
        "play/solved_hint": _mean([float(r >= WIN_THRESHOLD) for r in hinted]),
        "play/solved_nohint": _mean([float(r >= WIN_THRESHOLD) for r in unhinted]),
        "play/errors": sum(len(p.errors) for p in played),
        "play/parsed_rate": _mean([float(not t.malformed) for t in turns]),
        "play/ended": {k: ended[k] for k in s_play.EPISODE_ENDS if ended[k]},
    }


def score_metrics(scores: Scores) -> Metrics:
    return {
        "reward/regret_mean": _mean(scores.regrets),
        **regret_quantiles(scores.regrets),
        "reward/designer_mean": _mean(scores.designer_rewards),
        **{f"reward/{k}": v for k, v in scores.metrics.items()},
    }


def advantage_metrics(batch: Batch) -> Metrics:
    row: Metrics = {}
    for role in ("agent", "designer"):
        values = batch.advantages.get(role, [])
        row[f"adv/{role}_std"] = _std(values)
        row[f"adv/{role}_n"] = len(values)
    return row


def pool_metrics(state: RunState, added: int, retired: int) -> Metrics:
    return {
        "pool/size": len(state.pool),
        "pool/added": added,
        "pool/retired": retired,
        "pool/skills": dict(sorted(state.pool.skill_counts().items())),
        "memory/size": len(state.memory),
    }


def regret_quantiles(regrets: Sequence[float]) -> Metrics:
    """The designer's regret distribution: 10th, 50th and 90th percentile (linear
    interpolation, as numpy's default); nothing when no valid design was played."""
    xs = sorted(regrets)
    if not xs:
        return {}
    out: Metrics = {}
    for key, q in (("reward/regret_p10", 10), ("reward/regret_p50", 50), ("reward/regret_p90", 90)):
        pos = (len(xs) - 1) * q / 100
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        out[key] = xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return out


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _std(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5
