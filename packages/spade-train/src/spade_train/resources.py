"""What the steps of a run use, opened together and closed together.

:func:`open_resources` is a context manager that yields a :class:`Resources`: the policy
backend, the sandboxes that validate designs and open environments for play, the designer's
grounding, the progress display and the run directory. Every field is set (a Protocol, never
``None``); what a run does not need is a null object (``NO_GROUNDING``, a validator without a
warm pool). Leaving the ``with`` block closes what it opened, in reverse order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Protocol

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.backends.base import PolicyBackend
from spade_train.config import RunConfig
from spade_train.core.pool import PoolEntry
from spade_train.rundir import RunDir

# -- the seams -------------------------------------------------------------------------------


class Progress(Protocol):
    """What the steps report progress to (``spade_train.progress.StageProgress`` while a run
    is shown): a task per stage with a total, then how much of it is done."""

    def add_task(self, description: str, *, total: float | None = ...) -> int: ...

    def update(self, task: int, *, completed: float | None = ...) -> None: ...


class QuietProgress:
    """A :class:`Progress` that shows nothing (inner stages whose outer stage has the bar)."""

    def add_task(self, description: str, *, total: float | None = None) -> int:
        return 0

    def update(self, task: int, *, completed: float | None = None) -> None:
        return None


QUIET = QuietProgress()


class GroundingSnippet(Protocol):
    """The part of a grounding snippet the designer prompt shows (``spade_corpus.Snippet``)."""

    @property
    def text(self) -> str: ...


class Grounding(Protocol):
    """The designer's grounding: ``k`` snippets for designer prompt ``index``
    (``spade_corpus.GroundingSampler``)."""

    def sample(self, k: int, *, index: int = 0) -> Sequence[GroundingSnippet]: ...

    def document(self, *, index: int = 0, max_words: int = 6000) -> GroundingSnippet:
        """One whole document for designer prompt ``index`` (``grounding.mode: document``)."""
        ...


class NoGrounding:
    """A :class:`Grounding` that gives none (grounding off, or a mode without a designer)."""

    def sample(self, k: int, *, index: int = 0) -> Sequence[GroundingSnippet]:
        return []

    def document(self, *, index: int = 0, max_words: int = 6000) -> GroundingSnippet:
        raise ValueError("no grounding corpus: designer.grounding.enabled is false")


NO_GROUNDING = NoGrounding()


EnvOpener = Callable[[PoolEntry], se.EnvFactory]
"""Opens a pool entry's environment for play: the factory its episodes are built from."""


class DesignValidator(Protocol):
    """Runs the sandbox validator on a batch of designs: one report per item, in order."""

    def validate(
        self, items: Sequence[sc.ValidationItem], seeds: tuple[int, ...]
    ) -> list[sc.ValidationReport]: ...


@dataclass(frozen=True)
class SandboxValidator:
    """Validation in this process's warm sandbox pool (``None``: a fresh worker per item)."""

    pool: ss.SandboxPool | None
    workers: int

    def validate(
        self, items: Sequence[sc.ValidationItem], seeds: tuple[int, ...]
    ) -> list[sc.ValidationReport]:
        return sc.validate_many(
            list(items), workers=self.workers, progress=False, pool=self.pool, seeds=seeds
        )


class SandboxActors(Protocol):
    """Sandbox workers on Ray actors (``spade_train.backends.ray_sandbox.RaySandboxPool``)."""

    def validate_many(
        self,
        items: Sequence[sc.ValidationItem],
        *,
        seeds: tuple[int, ...],
        config: ss.SandboxConfig,
    ) -> list[sc.ValidationReport]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ActorValidator:
    """Validation on sandbox actors: the same reports, in the same order."""

    actors: SandboxActors
    config: ss.SandboxConfig

    def validate(
        self, items: Sequence[sc.ValidationItem], seeds: tuple[int, ...]
    ) -> list[sc.ValidationReport]:
        return self.actors.validate_many(items, seeds=seeds, config=self.config)


def sandboxed(pool: ss.SandboxPool | SandboxActors | None) -> EnvOpener:
    """Opens a pool entry's environment in the sandbox (a warm pool, sandbox actors, or a
    fresh worker per environment when ``None``)."""

    def opener(entry: PoolEntry) -> se.EnvFactory:
        return se.SandboxedFactory(entry.source, entry.class_name, pool=pool, origin=entry.env_id)

    return opener


# -- the resources ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    """What the steps use; made by :func:`open_resources`, valid inside its ``with`` block."""

    cfg: RunConfig
    backend: PolicyBackend
    validator: DesignValidator
    """Runs the sandbox validator (step 2) where ``validation.executor`` says."""
    sandboxed: EnvOpener
    """Opens an environment in the sandbox where ``agent.executor`` says (the designer's and
    the corpora's games; an environment source may open its own another way)."""
    local: EnvOpener
    """Opens an environment in this process's warm pool (a fresh worker when there is none)."""
    sandbox_config: ss.SandboxConfig
    run: RunDir
    grounding: Grounding
    progress: Progress
    pools: tuple[ss.SandboxPool | SandboxActors, ...] = ()
    """The sandbox pools this run started (closed with it): none for a mode whose
    environments run in this process."""


@contextmanager
def open_resources(
    cfg: RunConfig,
    run: RunDir,
    *,
    backend: PolicyBackend | None,
    make_backend: Callable[[], PolicyBackend],
    sandbox_config: ss.SandboxConfig,
    sandbox_pool: bool,
    grounding: Grounding,
    progress: Callable[[], AbstractContextManager[Progress]],
) -> Iterator[Resources]:
    """The run's resources: the policy (``backend``, or the one ``make_backend()`` makes, which
    is closed on leaving), a warm sandbox pool when ``sandbox_pool`` (sandbox actors when either
    executor is ``ray``), then the display ``progress()`` opens; on leaving, each is closed in
    the reverse order."""
    with ExitStack() as stack:
        policy = backend
        if policy is None:
            policy = make_backend()
            stack.callback(policy.close)
        pool: ss.SandboxPool | None = None
        started: list[ss.SandboxPool | SandboxActors] = []
        if sandbox_pool:
            pool = ss.SandboxPool(sandbox_config, size=cfg.validation.workers)
            stack.callback(pool.close)
            started.append(pool)
        actors: SandboxActors | None = None
        if "ray" in (cfg.validation.executor, cfg.agent.executor):
            actors = _sandbox_actors(cfg, sandbox_config)
            stack.callback(actors.close)
            started.append(actors)
        validator: DesignValidator = SandboxValidator(pool, cfg.validation.workers)
        if cfg.validation.executor == "ray" and actors is not None:
            validator = ActorValidator(actors, sandbox_config)
        play_pool = actors if cfg.agent.executor == "ray" else pool
        shown = stack.enter_context(progress())
        yield Resources(
            cfg=cfg,
            backend=policy,
            validator=validator,
            sandboxed=sandboxed(play_pool),
            local=sandboxed(pool),
            sandbox_config=sandbox_config,
            run=run,
            grounding=grounding,
            progress=shown,
            pools=tuple(started),
        )


def _sandbox_actors(cfg: RunConfig, sandbox_config: ss.SandboxConfig) -> SandboxActors:
    from spade_train.backends.ray_sandbox import RaySandboxPool

    actors: SandboxActors = RaySandboxPool(
        num_workers=cfg.validation.workers,
        call_timeout_s=60.0 + 20.0 * cfg.validation.timeout_s,
        sandbox_config=sandbox_config,
    )
    return actors


def grounding_sampler(cfg: RunConfig) -> Grounding:
    """The designer's grounding (documents or snippets, ``designer.grounding``); none when it
    is off."""
    g = cfg.designer.grounding
    if not g.enabled:
        return NO_GROUNDING
    sampler: Grounding = sc.GroundingSampler(
        g.corpus_file,
        field=g.field,
        max_chars=g.max_chars,
        min_chars=min(80, g.max_chars),
        seed=cfg.seed,
        uniform=g.mode == "document",  # upstream draws documents uniformly
    )
    return sampler
