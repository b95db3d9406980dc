"""Sandboxes on Ray actors: :class:`RaySandboxPool` runs ``spade_corpus.validate_many`` shards
and agent episodes (``open_env``, a drop-in for ``spade_sandbox.SandboxPool`` in
``spade_envs.SandboxedFactory``) on sandbox worker actors, with bounded waits; a dead or
unanswering actor is an ``InfrastructureError`` and is replaced for later sessions."""

from __future__ import annotations

import importlib
import itertools
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from spade_sandbox import (
    InfrastructureError,
    SandboxConfig,
    SandboxedEnv,
    SandboxError,
    SandboxPool,
)

from spade_train.errors import BackendError


def prepare_process(threads: int | None, inner_import: str | None) -> None:
    """An actor's process: torch's thread count, and the module an inner backend lives in."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    if inner_import:
        importlib.import_module(inner_import)


CALL_MARGIN_S = 30.0
"""Added to a sandbox config's own budget (worker start plus two calls) for a session call."""


def _portable(exc: Exception) -> Exception:
    """``exc`` itself when it pickles (sandbox errors do), else a RuntimeError with its text."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class _SandboxActor:
    """A sandbox worker actor: ``validate`` shards and played environments (sessions).

    The actor is threaded (``max_concurrency``), so several sessions progress at once. Each
    session is a ``spade_sandbox.SandboxedEnv`` from this actor's ``SandboxPool`` for the
    session's config (one pool per config, made on first use). Session calls never raise:
    they return ``("ok", value)`` or ``("error", exception)`` for the driver to re-raise.
    """

    def __init__(self, threads: int | None, pool_size: int = 2):
        prepare_process(threads, None)
        self._pool_size = pool_size
        self._pools: dict[SandboxConfig, SandboxPool] = {}
        self._sessions: dict[int, SandboxedEnv] = {}
        self._lock = threading.Lock()
        self._closed = False

    def validate(self, items: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        import spade_corpus as sc

        return sc.validate_many(items, progress=False, **kwargs)

    def _pool(self, config: SandboxConfig) -> SandboxPool:
        with self._lock:
            if self._closed:
                raise InfrastructureError("this sandbox actor is closed")
            pool = self._pools.get(config)
            if pool is None:
                pool = self._pools[config] = SandboxPool(config, size=self._pool_size)
            return pool

    def _session(self, sid: int) -> SandboxedEnv:
        with self._lock:
            env = self._sessions.get(sid)
        if env is None:
            raise ValueError("this environment is closed; open a new one")
        return env

    @staticmethod
    def _tagged(fn: Any) -> tuple[str, Any]:
        try:
            return "ok", fn()
        except Exception as exc:
            return "error", _portable(exc)

    def open(
        self, sid: int, source: str, class_name: str | None, kwargs: Any, config: SandboxConfig
    ) -> tuple[str, Any]:
        """Open session ``sid``; the value is the environment's class name."""

        def do() -> str | None:
            env = self._pool(config).open_env(source, class_name, kwargs)
            with self._lock:
                if self._closed:
                    env.close()
                    raise InfrastructureError("this sandbox actor is closed")
                self._sessions[sid] = env
            return env.class_name

        return self._tagged(do)

    def reset(self, sid: int, seed: int | None) -> tuple[str, Any]:
        return self._tagged(lambda: self._session(sid).reset(seed))

    def step(self, sid: int, action: str) -> tuple[str, Any]:
        return self._tagged(lambda: self._session(sid).step(action))

    def call(self, sid: int, method: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        return self._tagged(lambda: self._session(sid).call(method, *args))

    def close(self, sid: int) -> tuple[str, Any]:
        """Close session ``sid`` (unknown ids are ignored) and reap its worker."""
        with self._lock:
            env = self._sessions.pop(sid, None)
        return self._tagged(lambda: env.close() if env is not None else None)

    def sessions(self) -> int:
        """How many sessions are open on this actor."""
        with self._lock:
            return len(self._sessions)

    def close_all(self) -> None:
        """Close every session and sandbox pool of this actor; later opens fail."""
        with self._lock:
            self._closed = True
            envs, pools = list(self._sessions.values()), list(self._pools.values())
            self._sessions.clear()
            self._pools.clear()
        for env in envs:
            env.close()
        for pool in pools:
            pool.close()


class RayEnvHandle:
    """An environment played in a sandboxed worker owned by one sandbox actor.

    The interface of ``spade_sandbox.SandboxedEnv``: ``reset(seed)``, ``step(action)``,
    ``call(name, *args)``, ``close()`` (idempotent, also best effort when dropped), plus
    ``class_name``, ``source``, ``kwargs``, ``config`` and ``episodes``. Errors raised in the
    actor are re-raised here as the same exception objects; a dead or stuck actor raises
    ``spade_sandbox.InfrastructureError``. Returned by :meth:`RaySandboxPool.open_env`.
    """

    def __init__(
        self,
        pool: RaySandboxPool,
        index: int,
        actor: Any,
        sid: int,
        source: str,
        class_name: str | None,
        kwargs: dict | None,
        config: SandboxConfig,
    ) -> None:
        self._closed = True  # until the open succeeds (so __del__ of a failed open is a no-op)
        self._pool, self._actor, self._sid = pool, actor, sid
        self.actor_index = index
        """Which of the pool's actors holds this session."""
        args = (source, class_name, kwargs, config)
        try:
            self.class_name: str | None = pool._session_call(
                index, actor, "open", sid, args, pool.timeout
            )
        except InfrastructureError:
            try:  # a timed-out open may still finish in the actor: drop it there
                actor.close.remote(sid)
            except Exception:
                pass
            raise
        self._closed = False
        self.source, self.kwargs, self.config = source, dict(kwargs or {}), config
        self.requested_class = class_name
        self.episodes = 0
        """Episodes started (`reset` calls that succeeded) over this object's life."""

    def _call(self, method: str, *args: Any) -> Any:
        if self._closed or self._pool._closed:
            raise ValueError("this environment is closed; open a new one")
        timeout = self._pool._call_timeout(self.config)
        return self._pool._session_call(
            self.actor_index, self._actor, method, self._sid, args, timeout
        )

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        """Start an episode; returns (observation, info)."""
        obs, info = self._call("reset", seed)
        self.episodes += 1
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Take one action; returns (observation, reward, terminated, truncated, info)."""
        return self._call("step", action)

    def call(self, method: str, *args: object) -> object:
        """Call the environment's public method ``method`` with JSON arguments."""
        return self._call("call", method, args)

    def close(self) -> None:
        """Close the session and reap its worker; a dead actor is ignored; idempotent."""
        if self._closed:
            return
        try:
            if not self._pool._closed:
                self._call("close")
        except (SandboxError, ValueError):
            pass  # the actor is gone or stuck; its workers die with it
        finally:
            self._closed = True

    def __enter__(self) -> RayEnvHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            self._actor.close.remote(self._sid)  # no wait: a finalizer must not block
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"on sandbox actor {self.actor_index}"
        return f"<RayEnvHandle {self.class_name} {state}>"


class RaySandboxPool:
    """Sandbox worker actors: ``validate_many`` shards, and environments to play (``open_env``).

    ``open_env`` has the signature of ``spade_sandbox.SandboxPool.open_env`` (so
    ``spade_envs.SandboxedFactory(source, pool=ray_pool)`` plays on the actors): each session
    goes to the next actor in turn and lives in a sandboxed worker of that actor's own
    ``SandboxPool`` (``sandbox_pool_size`` warm workers per config). ``config=None`` means
    ``sandbox_config`` (default ``SandboxConfig.from_env()`` of this process); another config
    gets its own pool in the actor. Actors run ``max_concurrency`` calls at once. A session
    call waits at most the config's budget (``start_timeout_s + 2 * call_wall_s`` plus
    ``CALL_MARGIN_S``) or ``call_timeout_s``, whichever is less; opening a session and
    validation wait ``call_timeout_s`` (the first call also starts the actor). A dead actor is
    replaced for later sessions; its own sessions raise ``InfrastructureError``.
    """

    def __init__(
        self,
        num_workers: int = 2,
        num_cpus_per_worker: float = 0.5,
        call_timeout_s: float = 600,
        sandbox_config: SandboxConfig | None = None,
        sandbox_pool_size: int = 2,
        max_concurrency: int = 16,
    ) -> None:
        if num_workers < 1:
            raise BackendError(f"RaySandboxPool needs num_workers >= 1, got {num_workers}")
        if call_timeout_s <= 0:
            raise BackendError(f"RaySandboxPool needs call_timeout_s > 0, got {call_timeout_s}")
        if not ray.is_initialized():
            ray.init(include_dashboard=False, ignore_reinit_error=True)
        self.timeout = float(call_timeout_s)
        self.sandbox_config = SandboxConfig.from_env() if sandbox_config is None else sandbox_config
        actor: Any = ray.remote(num_cpus=num_cpus_per_worker)(_SandboxActor)
        self._remote = actor.options(max_concurrency=max_concurrency)
        self._pool_size = sandbox_pool_size
        self._lock = threading.Lock()
        self._closed = False
        self._turn = itertools.count()
        self._ids = itertools.count()
        self._actors = [self._new_actor() for _ in range(num_workers)]

    def _new_actor(self) -> Any:
        return self._remote.remote(None, self._pool_size)  # no torch there: a quick start

    def validate_many(self, items: Sequence[Any], **kwargs: Any) -> list[Any]:
        """Same reports, same order as ``spade_corpus.validate_many(items, **kwargs)``."""
        items = list(items)
        kwargs.setdefault("workers", 1)
        n = len(self._actors)
        bounds = [(len(items) * k // n, len(items) * (k + 1) // n) for k in range(n)]
        refs = [
            a.validate.remote(items[lo:hi], kwargs)
            for a, (lo, hi) in zip(self._actors, bounds, strict=True)
        ]
        try:
            shards = ray.get(refs, timeout=self.timeout)
        except GetTimeoutError as exc:
            raise BackendError(
                f"RaySandboxPool: validation timed out after {self.timeout:g}s; raise call_timeout_s"
            ) from exc
        except RayActorError as exc:
            raise BackendError(f"RaySandboxPool: a sandbox actor died: {exc}") from exc
        return [r for shard in shards for r in shard]

    # -- sessions -----------------------------------------------------------------------
    def open_env(
        self,
        source: str,
        class_name: str | None = None,
        kwargs: dict | None = None,
        config: SandboxConfig | None = None,
    ) -> RayEnvHandle:
        """As ``spade_sandbox.SandboxPool.open_env``, in a sandboxed worker of the next actor."""
        with self._lock:
            if self._closed:
                raise InfrastructureError("this RaySandboxPool is closed")
            index = next(self._turn) % len(self._actors)
            actor, sid = self._actors[index], next(self._ids)
        config = self.sandbox_config if config is None else config
        return RayEnvHandle(self, index, actor, sid, source, class_name, kwargs, config)

    def _call_timeout(self, config: SandboxConfig) -> float:
        budget = config.start_timeout_s + 2 * config.limits.call_wall_s + CALL_MARGIN_S
        return min(self.timeout, budget)

    def _session_call(
        self, index: int, actor: Any, method: str, sid: int, args: tuple[Any, ...], timeout: float
    ) -> Any:
        """``actor.method(sid, *args)``: its value, its exception re-raised, or an
        ``InfrastructureError`` when the actor died or did not answer within ``timeout``."""
        where = f"RaySandboxPool: {method} of session {sid} on sandbox actor {index}"
        try:
            tag, value = ray.get(getattr(actor, method).remote(sid, *args), timeout=timeout)
        except GetTimeoutError:
            raise InfrastructureError(
                f"{where} got no answer within {timeout:g}s (actor stuck or overloaded); "
                "raise call_timeout_s or check the cluster (ray status)"
            ) from None
        except RayActorError as exc:
            self._replace(index, actor)
            raise InfrastructureError(
                f"{where} failed: the actor died and its environments are lost ({exc})"
            ) from None
        except RayError as exc:
            raise InfrastructureError(f"{where} failed in Ray: {exc}") from None
        if tag == "error":
            raise value
        return value

    def _replace(self, index: int, dead: Any) -> None:
        """Start a fresh actor in place of ``dead`` (once) so later sessions have one."""
        with self._lock:
            if self._closed or self._actors[index] is not dead:
                return
            self._actors[index] = self._new_actor()
        try:
            ray.kill(dead)
        except RayError:
            pass

    def sessions(self) -> list[int]:
        """The number of open sessions on each actor."""
        refs = [a.sessions.remote() for a in self._actors]
        try:
            return ray.get(refs, timeout=self.timeout)
        except RayError as exc:
            raise InfrastructureError(f"RaySandboxPool: counting sessions failed: {exc}") from exc

    def close(self) -> None:
        """Close every session, then kill the sandbox actors; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            actors = list(self._actors)
        try:
            ray.get([a.close_all.remote() for a in actors], timeout=min(self.timeout, 60.0))
        except RayError:
            pass  # a dead or stuck actor: killing it takes its workers along
        for actor in actors:
            try:
                ray.kill(actor)
            except RayError:
                pass
