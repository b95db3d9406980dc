"""One cycle of SPADE as the six steps of the documentation's concepts page, each a function of :mod:`spade_train.steps`:

1. design — the designer writes environments (:func:`steps.design.design`)
2. validate — the sandbox judges them; the valid new ones enter the pool
3. play — the agent plays each chosen environment with and without its hint
4. score — agent reward = episode return; designer reward from its environment's outcome
5. advantage — group-relative per role, then per-role normalization, over the joint batch
6. update — one GRPO/PPO-clip step on the shared policy

then the plays are recorded in the pool and the environment memory. :func:`run_cycle` runs
them in order and returns the cycle's metrics row and its batch; :class:`Resources` is what the
steps use, :class:`RunState` what a checkpoint saves.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import spade_corpus as sc
import spade_sandbox as ss

from spade_train.config import RunConfig
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedDesignerRewards
from spade_train.core.learning_potential import GameBaselines
from spade_train.core.pool import EnvPool
from spade_train.rundir import RunDir, write_jsonl
from spade_train.spread import reward_spread
from spade_train.steps import design as s_design
from spade_train.steps import learn as s_learn
from spade_train.steps import pipeline as s_pipeline
from spade_train.steps import play as s_play
from spade_train.steps.records import Batch, Design, Episode, PlayedEnv, Scores
from spade_train.types import TrainSample


@dataclass
class Resources:
    """What the steps use: the config, the policy, the sandboxes and the run directory."""

    cfg: RunConfig
    backend: Any
    sandbox: Any
    """The warm sandbox pool of this process (``ss.SandboxPool``)."""
    ray_sandbox: Any
    """Sandbox actors on Ray, when ``validation.executor`` or ``agent.executor`` is ``ray``."""
    sandbox_config: ss.SandboxConfig
    run: RunDir
    grounding: Any = None


@dataclass
class RunState:
    """What a checkpoint saves besides the policy: the counters, the RNG, the pool, the memory,
    the delayed designer rewards and the procedural curriculum."""

    cycle: int
    rng: random.Random
    pool: EnvPool
    memory: sc.EnvironmentMemory
    delayed: DelayedDesignerRewards
    reward_state: rw.RewardState
    """The designer reward's per-skill learning-potential trackers."""
    baselines: GameBaselines
    """Per-game EMA of mean returns (``advantage.agent: ema-baseline``)."""
    curriculum: Any = None


def initial_state(cfg: RunConfig) -> RunState:
    """A new run's state: empty pool and memory, the RNG seeded, the baseline's curriculum."""
    curriculum: Any = None
    if cfg.mode == "fixed-procedural":
        from spade_train.core.procedural import ProceduralCurriculum

        curriculum = ProceduralCurriculum(
            cfg.fixed.generators, target=cfg.fixed.target_win_rate, seed=cfg.seed
        )
    elif cfg.mode == "fixed-rlve":
        from spade_train.core.rlve_source import RlveSource

        curriculum = RlveSource(cfg.rlve, seed=cfg.seed, max_turns=cfg.agent.max_turns)
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
        curriculum,
    )


def grounding_sampler(cfg: RunConfig) -> Any:
    """The designer's grounding (documents or snippets, ``designer.grounding``), or None."""
    g = cfg.designer.grounding
    if cfg.mode != "spade" or not g.enabled:
        return None
    return sc.GroundingSampler(
        g.corpus_file,
        field=g.field,
        max_chars=g.max_chars,
        min_chars=min(80, g.max_chars),
        seed=cfg.seed,
        uniform=g.mode == "document",  # upstream draws documents uniformly
    )


def rng_to_json(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def rng_from_json(data: list[Any]) -> tuple[Any, ...]:
    return (data[0], tuple(data[1]), data[2])


def run_cycle(
    res: Resources, state: RunState, cycle: int, progress: Any, *, train: bool = True
) -> tuple[dict[str, Any], list[TrainSample]]:
    """One cycle; returns its metrics row and its batch. ``train=False`` (overlap mode) leaves
    the update to the caller, who runs it beside the next cycle."""
    cfg = res.cfg
    row: dict[str, Any] = {"cycle": cycle}
    times: dict[str, float] = {}
    started = time.perf_counter()
    designs: list[Design] = []
    new_envs = []
    regenerate = s_design.regenerates(cfg, cycle)  # designer rounds: designer.regenerate_every
    between = cfg.mode == "spade" and not regenerate  # no hint plays, memory left alone
    replay = []  # between rounds: the last round's environments, played again
    with _timed(times, "design_s"):  # 1. design (or the baseline's source of environments)
        if regenerate:
            designs = s_design.design(
                cfg, res.backend, cycle, state.memory, res.grounding, progress
            )
        elif cfg.mode == "spade":
            replay = s_design.current_set(cfg, state.pool, cycle)
        elif cfg.mode == "fixed-procedural":
            new_envs = s_design.procedural_envs(cfg, state.curriculum, cycle)
        elif cfg.mode == "fixed-rlve":
            new_envs = state.curriculum.propose(cycle, cfg.agent.envs_per_cycle)
    if cfg.mode == "spade":
        row["design/regenerated"] = regenerate
    if regenerate:
        with _timed(times, "validate_s"):  # 2. validate, admit the valid new ones
            sandbox = res.ray_sandbox if cfg.validation.executor == "ray" else res.sandbox
            s_design.validate(cfg, designs, cycle, sandbox, res.sandbox_config, progress)
            row.update(  # reset gate, LLM validator, retries or repairs (designer.pipeline)
                s_pipeline.refine(
                    cfg, res.backend, designs, cycle, sandbox, res.sandbox_config, progress, started
                )
            )
            new_envs = s_design.admit_designs(cfg, designs, state.pool, cycle, res.sandbox_config)
        row.update(design_metrics(designs))
        row["design/new"] = s_design.mark_copies(designs)
        write_jsonl(
            res.run.designs / f"{res.run.cycle_name(cycle)}.jsonl", [d.to_row() for d in designs]
        )
    with _timed(times, "play_s"):  # 3. play
        envs = s_play.choose_envs(cfg, new_envs or replay, state.pool, state.rng)
        sandbox = res.ray_sandbox if cfg.agent.executor == "ray" else res.sandbox
        opener = s_play.sandboxed(sandbox)
        if cfg.mode == "fixed-rlve":  # trusted package code, played in this process
            opener = state.curriculum.factory
        played, episodes = s_play.play(
            cfg, res.backend, envs, cycle, opener, res.run, progress, hints=not between
        )
    row.update(play_metrics(played, episodes))
    judged = s_pipeline.self_judge(cfg, res.backend, designs, played, episodes, cycle)
    if judged:  # the verdicts join the design rows
        row.update(judged)
        write_jsonl(
            res.run.designs / f"{res.run.cycle_name(cycle)}.jsonl", [d.to_row() for d in designs]
        )
    scores = s_learn.score(  # 4. score
        cfg, cycle, designs, played, episodes, state.delayed, state.reward_state
    )
    row.update(score_metrics(scores))
    batch = s_learn.advantage(cfg, scores.agent + scores.designer, state.baselines)  # 5.
    row.update(advantage_metrics(batch))
    row.update(reward_spread(scores.agent + scores.designer))  # the raw rewards' signal
    if train:  # 6. update
        with _timed(times, "update_s"):
            metrics = s_learn.update(res.backend, batch, progress, cycle)
        row.update({f"train/{k}": v for k, v in metrics.items()})
    row["train/samples"] = len(batch.samples)
    s_learn.record_plays(
        played, cycle, state.pool, state.memory, state.curriculum, remember=not between
    )
    retired = state.pool.retire_saturated()
    row.update(pool_metrics(state, len(new_envs), len(retired)))
    if cfg.eval.heldout and cycle % cfg.eval.heldout_every == 0:
        with _timed(times, "heldout_s"):  # never trained: how the agent does on unseen games
            games = s_play.sandboxed(
                res.ray_sandbox if cfg.agent.executor == "ray" else res.sandbox
            )
            row.update(s_play.play_heldout(cfg, res.backend, cycle, games, res.run, progress))
    if cfg.mode == "fixed-rlve":
        row.update(state.curriculum.metrics())
    row.update({f"time/{k}": round(v, 3) for k, v in times.items()})
    row["time/cycle_s"] = round(time.perf_counter() - started, 3)
    return row, batch.samples


@contextmanager
def _timed(times: dict[str, float], key: str) -> Iterator[None]:
    t = time.perf_counter()
    yield
    times[key] = time.perf_counter() - t


def design_metrics(designs: Sequence[Design]) -> dict[str, Any]:
    reasons = Counter(d.reason for d in designs if not d.valid)
    valid = sum(d.valid for d in designs)
    return {
        "design/completions": len(designs),
        "design/parsed": sum(d.parse_error is None for d in designs),
        "design/valid": valid,
        "design/validity_rate": valid / max(1, len(designs)),
        "design/reasons": dict(sorted(reasons.items(), key=lambda kv: str(kv[0]))),
    }


def play_metrics(played: Sequence[PlayedEnv], episodes: Sequence[Episode]) -> dict[str, Any]:
    hinted = [r for p in played for r in p.hinted]
    unhinted = [r for p in played for r in p.unhinted]
    turns = [t for e in episodes for t in e.result.turns]
    ended = Counter(s_play.episode_end(e.result) for e in episodes)
    return {
        "play/envs": len(played),
        "play/episodes": len(hinted) + len(unhinted),
        "play/return_hint": _mean(hinted),
        "play/return_nohint": _mean(unhinted),
        "play/errors": sum(len(p.errors) for p in played),
        "play/parsed_rate": _mean([float(not t.malformed) for t in turns]),
        "play/ended": {k: ended[k] for k in s_play.EPISODE_ENDS if ended[k]},
    }


def score_metrics(scores: Scores) -> dict[str, Any]:
    return {
        "reward/regret_mean": _mean(scores.regrets),
        "reward/designer_mean": _mean(scores.designer_rewards),
        **{f"reward/{k}": v for k, v in scores.metrics.items()},
    }


def advantage_metrics(batch: Batch) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for role in ("agent", "designer"):
        values = batch.advantages.get(role, [])
        row[f"adv/{role}_std"] = _std(values)
        row[f"adv/{role}_n"] = len(values)
    return row


def pool_metrics(state: RunState, added: int, retired: int) -> dict[str, Any]:
    return {
        "pool/size": len(state.pool),
        "pool/added": added,
        "pool/retired": retired,
        "pool/skills": dict(sorted(state.pool.skill_counts().items())),
        "memory/size": len(state.memory),
    }


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _std(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5
