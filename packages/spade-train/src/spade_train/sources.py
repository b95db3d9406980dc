"""Where a cycle's environments come from: one :class:`EnvSource` per mode, registered by name.

``mode: spade`` — the designer writes and step 2 judges them (:class:`DesignerSource`);
``fixed-static`` — a static corpus seeds the pool, nothing new is made (:class:`StaticSource`);
``fixed-procedural`` — hand-written generators at adaptive levels (:class:`ProceduralSource`);
``fixed-rlve`` — RLVE's environments with their sliding-window difficulty
(:class:`RlveModeSource`). :func:`run_cycle <spade_train.cycle.run_cycle>` asks the run's
source, never the mode: a new source is a class and one ``ENV_SOURCES.register`` call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss
from spade_envs.plugins import Registry

from spade_train.config import RunConfig
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.procedural import ProceduralCurriculum
from spade_train.resources import (
    NO_GROUNDING,
    EnvOpener,
    Grounding,
    Resources,
    grounding_sampler,
)
from spade_train.rundir import write_jsonl
from spade_train.steps import design as s_design
from spade_train.steps import validate as s_validate
from spade_train.steps.admit import read_tools
from spade_train.steps.records import Validated
from spade_train.types import JSON, Metrics


class Clock:
    """A cycle's start and the seconds each of its stages took (``time/*`` metrics)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.times: dict[str, float] = {}

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.times[key] = time.perf_counter() - t


@dataclass(frozen=True)
class CycleInputs:
    """What a source's proposal may use: the run's resources, the cycle, the pool and the
    environment memory, the cycle's clock."""

    res: Resources
    cycle: int
    pool: EnvPool
    memory: sc.EnvironmentMemory
    clock: Clock


@dataclass(frozen=True)
class Proposal:
    """A cycle's new environments (played first, then pool draws when the source plays the
    pool), the designer's judged slots (``mode: spade``), and the metrics of making them.
    Between designer rounds (``between``) there are no new ones: the last round's
    environments are played again (``replay``), without hint plays, the memory left alone."""

    new_envs: list[PoolEntry]
    slots: list[Validated] = field(default_factory=list)
    metrics: Metrics = field(default_factory=dict)
    replay: list[PoolEntry] = field(default_factory=list)
    between: bool = False


class EnvSource(Protocol):
    """One mode's source of environments (see the module docstring)."""

    plays_pool: bool
    """The cycle plays pool draws beside the new environments (up to ``envs_per_cycle``)."""
    measures_regret: bool
    """Its environments get hint plays: the designer's reward reads their regret."""
    sandbox_pool: bool
    """Its environments run in the sandbox (a warm pool is opened for the run)."""

    def sandbox_config(self, base: ss.SandboxConfig) -> ss.SandboxConfig:
        """The sandbox its environments run in, given the recipe's."""
        ...

    def grounding(self) -> Grounding:
        """The designer's grounding (none for a source without a designer)."""
        ...

    def seed_pool(self, pool: EnvPool, sandbox_config: ss.SandboxConfig) -> tuple[int, Path] | None:
        """Fill a new run's pool (how many entered, from where); None when it has none."""
        ...

    def latest_round(self, pool: EnvPool, cycle: int) -> list[PoolEntry] | None:
        """The environments of the designer's latest round (None: a source with no designer)."""
        ...

    def propose(self, inputs: CycleInputs) -> Proposal:
        """This cycle's new environments (steps 1 and 2 for the designer)."""
        ...

    def opener(self, res: Resources) -> EnvOpener:
        """How its environments are opened for play."""
        ...

    def observe(self, entry: PoolEntry, returns: Sequence[float]) -> None:
        """An environment's unhinted returns of this cycle, in play order (its curriculum)."""
        ...

    def metrics(self) -> Metrics:
        """Its own metrics for the cycle's row (after the plays were observed)."""
        ...

    def state_dict(self) -> Mapping[str, JSON] | None:
        """What a checkpoint keeps of it (None: nothing)."""
        ...

    def load_state_dict(self, state: Mapping[str, JSON]) -> None: ...


# -- the corpus a run's pool starts with ----------------------------------------------------------


def corpus_missing(name: str) -> str:
    """The one line said when ``fixed.corpus`` names no corpus (``$CORPUS_DIR`` unset)."""
    what = "CORPUS_DIR is not set" if "${" in name else f"{name} does not exist"
    return (
        f"fixed.corpus: {what}; download the released corpus with "
        "`uv run spade-envs fetch --out DIR` and set CORPUS_DIR=DIR "
        "(or fixed.corpus=example for the 60-game example corpus)"
    )


def corpus_path(cfg: RunConfig) -> Path:
    """The directory of ``fixed.corpus``; FileNotFoundError (one line) when there is none."""
    name = cfg.fixed.corpus
    if name == "example" and cfg.setting == "tool-use":
        return Path(se.tool_use_corpus_path())
    if "${" in name:
        raise FileNotFoundError(corpus_missing(name))
    try:  # a shipped corpus's name (example, starter, tool_use) or a path
        return Path(se.resolve_corpus_path(name))
    except se.CorpusError as exc:
        raise FileNotFoundError(corpus_missing(name)) from exc


def seed_pool_from_corpus(
    cfg: RunConfig, pool: EnvPool, sandbox_config: ss.SandboxConfig
) -> tuple[int, Path]:
    """Put the corpus's environments (split ``fixed.split``) into the pool; how many entered
    and from where (a released tool-use game's tools are read in the sandbox)."""
    path = corpus_path(cfg)
    corpus = se.load_corpus(path)
    compat = corpus.mode == "compat"  # written for the released code: run as it ran them
    added = 0
    for rec in corpus.records:
        if rec.split != cfg.fixed.split:
            continue
        original = corpus.source(rec.id)
        source = se.compat_source(original) if compat else original
        tools = rec.extra.get("tools") if cfg.setting == "tool-use" else None
        if cfg.setting == "tool-use" and compat and not tools:  # a ToolUseBaseEnv subclass's
            name = se.find_env_class(source, rec.class_name)
            tools = read_tools(source, name, sandbox_config)
        entry = PoolEntry(
            env_id=rec.id,
            source=source,
            class_name=rec.class_name,
            hint=rec.hint,
            # tool-use environments are grouped by domain (their skill is "ToolUse")
            skill=str(rec.extra.get("domain") or rec.skill) if tools else rec.skill,
            # released games keep their own designed turn limit, within the agent's budget
            max_turns=min(
                (se.designed_max_turns(original) if compat else None) or rec.max_turns,
                cfg.agent.max_turns,
            ),
            cycle_added=0,
            origin=rec.origin,
            tools=tools,
        )
        added += pool.add(entry) is not None
    return added, path


# -- the sources --------------------------------------------------------------------------------


class _Plain:
    """What most sources share: sandboxed play, no curriculum, no metrics, no state."""

    plays_pool = True
    measures_regret = False
    sandbox_pool = True

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg

    def sandbox_config(self, base: ss.SandboxConfig) -> ss.SandboxConfig:
        return base

    def grounding(self) -> Grounding:
        return NO_GROUNDING

    def seed_pool(self, pool: EnvPool, sandbox_config: ss.SandboxConfig) -> tuple[int, Path] | None:
        return None

    def latest_round(self, pool: EnvPool, cycle: int) -> list[PoolEntry] | None:
        return None

    def opener(self, res: Resources) -> EnvOpener:
        return res.sandboxed

    def observe(self, entry: PoolEntry, returns: Sequence[float]) -> None:
        return None

    def metrics(self) -> Metrics:
        return {}

    def state_dict(self) -> Mapping[str, JSON] | None:
        return None

    def load_state_dict(self, state: Mapping[str, JSON]) -> None:
        return None


class DesignerSource(_Plain):
    """``mode: spade``: the designer writes environments (step 1), step 2 judges them, the
    valid new ones enter the pool; the pool starts with ``fixed.corpus``."""

    measures_regret = True

    def grounding(self) -> Grounding:
        return grounding_sampler(self.cfg)

    def seed_pool(self, pool: EnvPool, sandbox_config: ss.SandboxConfig) -> tuple[int, Path] | None:
        return seed_pool_from_corpus(self.cfg, pool, sandbox_config)

    def latest_round(self, pool: EnvPool, cycle: int) -> list[PoolEntry] | None:
        return s_design.current_set(self.cfg, pool, cycle)

    def propose(self, inputs: CycleInputs) -> Proposal:
        """A designer round every ``designer.regenerate_every`` cycles (steps 1 and 2); in
        between, the last round's environments again."""
        res, cycle, clock = inputs.res, inputs.cycle, inputs.clock
        if not s_design.regenerates(self.cfg, cycle):
            with clock.timed("design_s"):
                replay = s_design.current_set(self.cfg, inputs.pool, cycle)
            return Proposal([], metrics={"design/regenerated": False}, replay=replay, between=True)
        with clock.timed("design_s"):  # 1. design
            designs = s_design.design(
                self.cfg, res.backend, cycle, inputs.memory, res.grounding, res.progress
            )
        with clock.timed("validate_s"):  # 2. validate, admit the valid new ones
            judging = s_validate.Judging(
                self.cfg, res.backend, cycle, res.validator, res.sandbox_config
            )
            step2 = s_validate.validate(judging, designs, inputs.pool, res.progress, clock.started)
        write_design_rows(res, cycle, step2.slots)
        return Proposal(step2.new_envs, step2.slots, {"design/regenerated": True, **step2.metrics})


def write_design_rows(res: Resources, cycle: int, slots: Sequence[Validated]) -> None:
    """The cycle's designer slots as ``designs/cycle_NNNN.jsonl`` (written again when the
    self-judge adds its verdicts)."""
    write_jsonl(res.run.designs / f"{res.run.cycle_name(cycle)}.jsonl", [s.to_row() for s in slots])


class StaticSource(_Plain):
    """``mode: fixed-static``: the pool is a static corpus (the released GPT-5.5 one, in
    compatibility mode); nothing new is made."""

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        corpus_path(cfg)  # a missing corpus is one line, before anything is created

    def sandbox_config(self, base: ss.SandboxConfig) -> ss.SandboxConfig:
        # no designer output here: a released corpus may use numpy
        return se.compat_sandbox_config(base)

    def seed_pool(self, pool: EnvPool, sandbox_config: ss.SandboxConfig) -> tuple[int, Path] | None:
        return seed_pool_from_corpus(self.cfg, pool, sandbox_config)

    def propose(self, inputs: CycleInputs) -> Proposal:
        with inputs.clock.timed("design_s"):
            return Proposal([])


class ProceduralSource(_Plain):
    """``mode: fixed-procedural``: hand-written generators at levels kept inside the target
    win-rate band (:class:`~spade_train.core.procedural.ProceduralCurriculum`); each cycle
    plays only its fresh environments, never pooled."""

    plays_pool = False

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.curriculum = ProceduralCurriculum(
            cfg.fixed.generators, target=cfg.fixed.target_win_rate, seed=cfg.seed
        )

    def propose(self, inputs: CycleInputs) -> Proposal:
        cycle, n = inputs.cycle, self.cfg.agent.envs_per_cycle
        with inputs.clock.timed("design_s"):
            entries = [
                PoolEntry(
                    env_id=f"c{cycle:04d}_proc{i}_{d.origin}",
                    source=d.source,
                    class_name=d.class_name,
                    hint=d.hint,
                    skill=d.skill,
                    max_turns=self.cfg.agent.max_turns,
                    cycle_added=cycle,
                    origin=d.origin,
                )
                for i, d in enumerate(self.curriculum.propose(n))
            ]
        return Proposal(entries)

    def observe(self, entry: PoolEntry, returns: Sequence[float]) -> None:
        self.curriculum.observe(entry, list(returns))

    def state_dict(self) -> Mapping[str, JSON] | None:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: Mapping[str, JSON]) -> None:
        self.curriculum.load_state_dict(dict(state))


class RlveModeSource(_Plain):
    """``mode: fixed-rlve``: RLVE's environments (trusted package code, played in this
    process: no sandbox pool) at the difficulty of its sliding-window controller
    (:class:`~spade_train.core.rlve_source.RlveSource`)."""

    plays_pool = False
    sandbox_pool = False

    def __init__(self, cfg: RunConfig) -> None:
        from spade_train.core.rlve_source import RlveSource

        super().__init__(cfg)
        self.rlve = RlveSource(cfg.rlve, seed=cfg.seed, max_turns=cfg.agent.max_turns)

    def propose(self, inputs: CycleInputs) -> Proposal:
        with inputs.clock.timed("design_s"):
            entries = self.rlve.propose(inputs.cycle, self.cfg.agent.envs_per_cycle)
        return Proposal(entries)

    def opener(self, res: Resources) -> EnvOpener:
        return self.rlve.factory

    def observe(self, entry: PoolEntry, returns: Sequence[float]) -> None:
        self.rlve.observe(entry, list(returns))

    def metrics(self) -> Metrics:
        return dict(self.rlve.metrics())

    def state_dict(self) -> Mapping[str, JSON] | None:
        return self.rlve.state_dict()

    def load_state_dict(self, state: Mapping[str, JSON]) -> None:
        self.rlve.load_state_dict(dict(state))


SourceFactory = Callable[[RunConfig], EnvSource]

ENV_SOURCES: Registry[SourceFactory] = Registry(
    "environment source", entry_points="spade_train.env_sources"
)
"""The environment sources by mode name (spade-envs' one registry)."""
ENV_SOURCES.register("spade", DesignerSource)
ENV_SOURCES.register("fixed-static", StaticSource)
ENV_SOURCES.register("fixed-procedural", ProceduralSource)
ENV_SOURCES.register("fixed-rlve", RlveModeSource)


def make_source(cfg: RunConfig) -> EnvSource:
    """The run's environment source (``mode``)."""
    return ENV_SOURCES.get(cfg.mode)(cfg)
