"""Step 3: the agent plays each chosen environment with and without its hint."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import spade_envs as se

from spade_train.backends.base import PolicyBackend
from spade_train.config import RunConfig
from spade_train.core import advantages as adv
from spade_train.core import rewards as rw
from spade_train.core.hint_plays import PlannedEpisode, plan_episodes
from spade_train.core.pool import WIN_THRESHOLD, EnvPool, PoolEntry
from spade_train.play import PolicyAgent, episode_samples
from spade_train.resources import EnvOpener, Progress
from spade_train.rundir import RunDir
from spade_train.seeds import derive_seed
from spade_train.steps.records import Episode, PlayedEnv
from spade_train.types import JSON, Metrics, SamplingParams, TrainSample


def choose_envs(
    cfg: RunConfig,
    new_envs: Sequence[PoolEntry],
    pool: EnvPool,
    rng: random.Random,
    *,
    from_pool: bool = True,
) -> list[PoolEntry]:
    """This cycle's environments: the new ones, then (``from_pool``) pool draws up to
    ``envs_per_cycle`` (the fixed-procedural and fixed-rlve baselines play only their fresh
    environments)."""
    chosen = list(new_envs)
    room = max(0, cfg.agent.envs_per_cycle - len(chosen))
    if room and from_pool:
        taken = {e.env_id for e in chosen}
        drawn = pool.sample(room + len(taken), rng)
        chosen += [e for e in drawn if e.env_id not in taken][:room]
    return chosen


def episodes_per_env(cfg: RunConfig, n_envs: int) -> int:
    """Trained episodes per environment this cycle: ``ceil(batch_episodes / n_envs)`` when
    the batch is set (upstream's global batch over its games), else ``episodes_per_env``."""
    a = cfg.agent
    if a.batch_episodes is None or n_envs < 1:
        return a.episodes_per_env
    return -(-a.batch_episodes // n_envs)


def hint_plays(cfg: RunConfig, regret: bool = True) -> int:
    """Hinted episodes per environment: only SPADE's designer reward reads them (``regret``:
    the environment source is the designer, whose reward measures regret)."""
    if not regret or not rw.get_designer_reward(cfg.reward.designer).uses_hint:
        return 0
    return cfg.agent.hint_plays_per_env


def agent_system_prompt(cfg: RunConfig) -> str | None:
    """The system message of the agent's episodes (``agent.system_prompt``; ``""``: none)."""
    prompt = cfg.agent.system_prompt
    if prompt is None:
        return se.DEFAULT_SYSTEM_PROMPT
    return prompt or None


@dataclass(frozen=True)
class Playing:
    """What step 3 uses: the policy, how it opens environments, where transcripts go."""

    cfg: RunConfig
    backend: PolicyBackend
    opener: EnvOpener
    run: RunDir
    progress: Progress
    hinted_per_env: int
    """Hinted episodes per environment (``hint_plays``; 0 between designer rounds, where
    nothing reads them)."""


def play(
    ctx: Playing, envs: Sequence[PoolEntry], cycle: int, stream: str = "agent"
) -> tuple[list[PlayedEnv], list[Episode]]:
    """Per environment ``episodes_per_env`` unhinted (trained) episodes and
    ``ctx.hinted_per_env`` hinted ones on their own seeds (reward only, unless
    ``train_hint_plays``); the first transcripts of the cycle are saved (none for any
    ``stream`` but ``agent``, which also names the sampling seeds' stream)."""
    cfg, a = ctx.cfg, ctx.cfg.agent
    specs, owners = episode_specs(ctx, envs, cycle)
    label = "play" if stream == "agent" else stream
    task = ctx.progress.add_task(f"cycle {cycle}: {label}", total=max(1, len(specs)))
    base = derive_seed(cfg.seed, cycle, stream)

    def params_for(call: int) -> SamplingParams:
        return a.sampling.to_params((base + call) & 0x7FFFFFFF)

    agent = PolicyAgent(ctx.backend, params_for, answer_prefix=a.answer_prefix, thinking=a.thinking)
    results: list[se.EpisodeResult] = []
    if specs:
        results = se.run_episodes(
            specs,
            agent,
            on_turn=lambda done, total: ctx.progress.update(task, completed=done),
            concurrency=a.concurrency,
            workers=a.env_workers,
            scoring=a.scoring,
            system_prompt=agent_system_prompt(cfg),
            agent_turn_s=a.turn_budget_s,
            agent_episode_s=a.episode_budget_s,
        )
    ctx.progress.update(task, completed=max(1, len(specs)))
    played, episodes = collect(cfg, agent, envs, results, owners)
    if stream == "agent":
        save_transcripts(episodes, played, ctx.run, cycle, cfg.logging.transcripts_per_cycle)
    return played, episodes


def episode_specs(
    ctx: Playing, envs: Sequence[PoolEntry], cycle: int
) -> tuple[list[se.EpisodeSpec], list[tuple[int, PlannedEpisode]]]:
    """The episodes to play, each with the environment (index) and plan it belongs to."""
    a = ctx.cfg.agent
    specs, owners = [], []
    n_episodes = episodes_per_env(ctx.cfg, len(envs))
    for k, entry in enumerate(envs):
        factory = ctx.opener(entry)
        hinted = ctx.hinted_per_env if entry.hint else 0  # no hint: a hinted play is a repeat
        plan = plan_episodes(ctx.cfg.seed, cycle, entry.env_id, n_episodes, hinted,
                             paired=a.paired_hint_seeds, train_hinted=a.train_hint_plays)  # fmt: skip
        for planned in plan:
            specs.append(
                se.EpisodeSpec(
                    factory,
                    seed=planned.seed,
                    hint=entry.hint if planned.hinted else None,
                    env_id=entry.env_id,
                    max_turns=min(entry.max_turns, a.max_turns),
                    tools=entry.tools,
                    respect_env_max_turns=a.respect_env_max_turns,
                )
            )
            owners.append((k, planned))
    return specs, owners


def collect(
    cfg: RunConfig,
    agent: PolicyAgent,
    envs: Sequence[PoolEntry],
    results: Sequence[se.EpisodeResult],
    owners: Sequence[tuple[int, PlannedEpisode]],
) -> tuple[list[PlayedEnv], list[Episode]]:
    """The played episodes gathered per environment, with their agent-role samples."""
    played = [PlayedEnv(e) for e in envs]
    episodes = []
    for result, (k, planned) in zip(results, owners, strict=True):
        p = played[k]
        (p.hinted if planned.hinted else p.unhinted).append(result.episode_return)
        if result.error is not None:
            p.errors.append(f"{result.error.boundary}: {result.error.kind}")
        p.step_timeout = p.step_timeout or result.step_timeout
        samples = agent_samples(
            cfg, agent, result, {"env_id": p.entry.env_id, "hinted": planned.hinted}
        )
        episodes.append(Episode(k, planned.hinted, result, samples, planned.trained))
    return played, episodes


def heldout_envs(cfg: RunConfig) -> list[PoolEntry]:
    """The ``heldout`` split of ``eval.heldout`` as pool entries (never added to the pool)."""
    corpus = se.load_corpus(se.resolve_corpus_path(cfg.eval.heldout or ""))
    return [
        PoolEntry(
            env_id=f"heldout:{rec.id}",
            source=corpus.source(rec.id),
            class_name=rec.class_name,
            hint=rec.hint,
            skill=rec.skill,
            max_turns=min(rec.max_turns, cfg.agent.max_turns),
            cycle_added=0,
            origin=rec.origin,
        )
        for rec in corpus.records
        if rec.split == "heldout"
    ]


def play_heldout(ctx: Playing, cycle: int) -> Metrics:
    """``eval.heldout``'s held-out games played like the cycle's own, never trained: mean
    return with and without the hint (with it only where hinted episodes were played) and the
    win rate (``heldout/*``)."""
    played, episodes = play(ctx, heldout_envs(ctx.cfg), cycle, stream="heldout")
    hinted = [r for p in played for r in p.hinted]
    unhinted = [r for p in played for r in p.unhinted]
    row: Metrics = {
        "heldout/return_nohint": sum(unhinted) / max(1, len(unhinted)),
        "heldout/won": sum(e.result.won for e in episodes) / max(1, len(episodes)),
        "heldout/episodes": len(episodes),
    }
    if hinted:  # no hinted plays: no number, rather than a 0 that reads as one
        row["heldout/return_hint"] = sum(hinted) / len(hinted)
    return row


def agent_samples(
    cfg: RunConfig, agent: PolicyAgent, result: se.EpisodeResult, meta: dict[str, JSON]
) -> list[TrainSample]:
    """The episode's agent-role samples: a tool call that could not be parsed is masked
    (``mask_malformed_tool_calls``), an episode cut off by the turn limit trains nothing
    (``compact_filter``)."""
    trained = None
    if cfg.advantage.mask_malformed_tool_calls:
        trained = [not bad for bad in adv.malformed_tool_call_turns(result.turns)]
    samples = episode_samples(agent, result, 0.0, meta, trained)
    if cfg.advantage.compact_filter:
        samples = adv.compact_filter(samples, result.truncated)
    return samples


EPISODE_ENDS = (
    "won",
    "lost",
    "truncated",
    "malformed",
    "environment_error",
    "agent_error",
    "sandbox_limit",
    "infrastructure",
)
"""Why an episode ended, as ``spade inspect`` and the ``play/ended`` metric count them."""


def episode_end(result: se.EpisodeResult) -> str:
    """One of :data:`EPISODE_ENDS` for a played episode: its error's boundary if it stopped on
    one; else won (return >= 1), malformed (no turn gave a parsed action), truncated (out of
    turns), or lost."""
    if result.error is not None:
        return {
            "environment": "environment_error",
            "agent": "agent_error",
            "sandbox": "sandbox_limit",
        }.get(result.error.boundary, "infrastructure")
    if result.episode_return >= WIN_THRESHOLD:
        return "won"
    if result.turns and all(t.malformed for t in result.turns):
        return "malformed"
    if result.truncated or not result.terminated:
        return "truncated"
    return "lost"


def save_transcripts(
    episodes: Sequence[Episode], played: Sequence[PlayedEnv], run: RunDir, cycle: int, keep: int
) -> None:
    out = run.transcripts / run.cycle_name(cycle)
    for n, ep in enumerate(episodes[:keep]):
        env_id = played[ep.env_index].entry.env_id
        tag = "hint" if ep.hinted else "nohint"
        se.write_transcript(ep.result, out / f"{n:03d}_{_safe(env_id)}_{tag}.json")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60]
