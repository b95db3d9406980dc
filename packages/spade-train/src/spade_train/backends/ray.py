"""The ``ray`` backend: the same PolicyBackend, spread over Ray actors.

One trainer actor owns the inner training backend (``local`` by default, ``megatron`` on GPUs);
``num_rollout_workers`` rollout actors each own a generation copy of the policy (an inner
backend, or an SGLang server / engine). After each update :meth:`RayBackend.publish_weights`
sends the trainer's weights to every rollout worker (object-store ``state_dict`` for local
workers, SGLang's weight-update API for SGLang workers, a disk checkpoint as the fallback).

Every ``ray.get`` has a timeout (``call_timeout_s``). A rollout worker that dies or times out is
restarted once from the last published weights and the call retried; a second failure, or any
trainer failure, raises :class:`BackendError`. Nothing waits forever.

:class:`RaySandboxPool` puts sandboxes on actors: ``validate_many`` shards, and agent episodes
(``open_env``, a drop-in for ``spade_sandbox.SandboxPool`` in ``spade_envs.SandboxedFactory``).
"""

from __future__ import annotations

import importlib
import itertools
import os
import pickle
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from spade_sandbox import (
    InfrastructureError,
    SandboxConfig,
    SandboxedEnv,
    SandboxError,
    SandboxPool,
)

from spade_train.backends.base import make_backend
from spade_train.errors import BackendError
from spade_train.types import Generation, Message, SamplingParams, TrainSample

_MODULE_ATTRS = ("model", "policy", "module")


def _torch_module(backend: Any) -> Any | None:
    """The ``torch.nn.Module`` a backend trains, when it exposes one (``.model`` and friends)."""
    for attr in _MODULE_ATTRS:
        module = getattr(backend, attr, None)
        if module is not None and hasattr(module, "state_dict"):
            return module
    return None


def _prepare_process(threads: int | None, inner_import: str | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)
    if inner_import:
        importlib.import_module(inner_import)


class _TrainerActor:
    """Owns the inner training backend."""

    def __init__(self, inner: str, options: dict[str, Any], threads: int | None, imp: str | None):
        _prepare_process(threads, imp)
        self.backend = make_backend(inner, **options)

    def ready(self) -> bool:
        return True

    def train_step(self, samples: list[TrainSample]) -> dict[str, float]:
        return self.backend.train_step(samples)

    def generate(self, conversations, params, tools) -> list[Generation]:
        return self.backend.generate(conversations, params, tools)

    def save(self, path: str) -> None:
        self.backend.save(Path(path))

    def load(self, path: str) -> None:
        self.backend.load(Path(path))

    def state_dict(self) -> dict[str, Any] | None:
        module = _torch_module(self.backend)
        if module is None:
            return None
        return {k: v.detach().to("cpu").clone() for k, v in module.state_dict().items()}

    def save_hf(self, path: str) -> None:
        """Write the weights as a Hugging Face checkpoint (for SGLang's disk update)."""
        module = _torch_module(self.backend)
        if module is None or not hasattr(module, "save_pretrained"):
            raise BackendError(
                "the inner trainer exposes no HF model; cannot write weights for SGLang"
            )
        module.save_pretrained(path)
        tokenizer = getattr(self.backend, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)

    def close(self) -> None:
        self.backend.close()


class _LocalRolloutActor:
    """A generation copy of the policy: an inner backend used only for ``generate``."""

    def __init__(self, inner: str, options: dict[str, Any], threads: int | None, imp: str | None):
        _prepare_process(threads, imp)
        self.backend = make_backend(inner, **options)

    def ready(self) -> bool:
        return True

    def generate(self, conversations, params, tools) -> list[Generation]:
        return self.backend.generate(conversations, params, tools)

    def set_weights(self, state: dict[str, Any]) -> None:
        module = _torch_module(self.backend)
        if module is None:
            raise BackendError("the rollout backend exposes no torch module to load weights into")
        module.load_state_dict(state)
        self.backend.publish_weights()

    def load(self, path: str) -> None:
        self.backend.load(Path(path))

    def close(self) -> None:
        self.backend.close()


class _SGLangRolloutActor:
    """Generation through an SGLang server (``url``) with the policy's tokenizer."""

    def __init__(self, url: str, model: str, timeout_s: float):
        from transformers import AutoTokenizer

        from spade_train.backends.sglang import SGLangClient

        self.client = SGLangClient(url, timeout_s=timeout_s)
        self.client.health()
        self.tokenizer = AutoTokenizer.from_pretrained(model)

    def ready(self) -> bool:
        return True

    def generate(self, conversations, params, tools) -> list[Generation]:
        from spade_train.backends.sglang import generate_chat

        return generate_chat(self.client, self.tokenizer, conversations, params, tools)

    def update_from_disk(self, path: str) -> None:
        self.client.update_weights_from_disk(path)

    def close(self) -> None:
        pass


class RayBackend:
    """PolicyBackend orchestrating a trainer actor and rollout worker actors on Ray."""

    name = "ray"

    def __init__(
        self,
        inner: str = "local",
        num_rollout_workers: int = 1,
        num_trainers: int = 1,
        colocate: bool = True,
        num_cpus_per_worker: float = 1.0,
        num_gpus_per_worker: float = 0.0,
        sglang_url: str | None = None,
        call_timeout_s: float = 600.0,
        ray_address: str | None = None,
        ray_num_cpus: int | None = None,
        worker_threads: int | None = 1,
        inner_import: str | None = None,
        **inner_options: Any,
    ) -> None:
        if num_rollout_workers < 1:
            raise BackendError(f"num_rollout_workers must be >= 1, got {num_rollout_workers}")
        if num_trainers != 1:
            raise BackendError(
                f"num_trainers={num_trainers}: the ray backend runs one trainer actor; scale the "
                "update with inner='megatron' (tensor/pipeline/data parallel inside it)"
            )
        if call_timeout_s <= 0:
            raise BackendError(f"call_timeout_s must be > 0, got {call_timeout_s}")
        self.timeout = float(call_timeout_s)
        self.inner, self.options = inner, dict(inner_options)
        self.sglang_url = sglang_url
        self._threads, self._import = worker_threads, inner_import
        if not ray.is_initialized():
            if ray_address:
                ray.init(address=ray_address, ignore_reinit_error=True)
            else:
                ray.init(num_cpus=ray_num_cpus, include_dashboard=False, ignore_reinit_error=True)
        self._own_dir = Path(tempfile.mkdtemp(prefix="spade-ray-"))
        cpus, gpus = float(num_cpus_per_worker), float(num_gpus_per_worker)
        bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
        # Colocated: each rollout worker shares the trainer's bundle (GPU split in halves);
        # disaggregated: one bundle per actor.
        n_bundles = 1 if colocate else 1 + num_rollout_workers
        self._pg = placement_group([dict(bundle) for _ in range(n_bundles)], strategy="PACK")
        self._get(self._pg.ready(), "placement group (not enough CPUs/GPUs in the cluster?)")
        self._colocate, self._cpus, self._gpus = colocate, cpus, gpus
        self._n_rollout = num_rollout_workers
        trainer_res = (cpus / 2, gpus / 2) if colocate else (cpus, gpus)
        self._trainer = self._spawn(_TrainerActor, 0, trainer_res, inner, self.options)
        self._get(self._trainer.ready.remote(), "trainer actor start")
        self._rollout: list[Any] = [self._new_rollout(i) for i in range(num_rollout_workers)]
        for i, actor in enumerate(self._rollout):
            self._get(actor.ready.remote(), f"rollout worker {i} start")
        self._published: Any = None
        self._published_dir: str | None = None
        self.publish_weights()

    # -- actors -------------------------------------------------------------------------
    def _spawn(self, cls: type, bundle: int, res: tuple[float, float], *args: Any) -> Any:
        strategy = PlacementGroupSchedulingStrategy(
            placement_group=self._pg, placement_group_bundle_index=bundle
        )
        remote: Any = ray.remote(num_cpus=res[0], num_gpus=res[1], max_restarts=0)(cls)
        if cls in (_TrainerActor, _LocalRolloutActor):
            args = (*args, self._threads, self._import)
        return remote.options(scheduling_strategy=strategy).remote(*args)

    def _new_rollout(self, i: int) -> Any:
        bundle = 0 if self._colocate else 1 + i
        share = 2 * self._n_rollout
        res = (
            (self._cpus / share, self._gpus / share) if self._colocate else (self._cpus, self._gpus)
        )
        if self.sglang_url:
            model = str(self.options.get("model", ""))
            return self._spawn(
                _SGLangRolloutActor, bundle, res, self.sglang_url, model, self.timeout
            )
        return self._spawn(_LocalRolloutActor, bundle, res, self.inner, self.options)

    def _get(self, ref: Any, what: str) -> Any:
        try:
            return ray.get(ref, timeout=self.timeout)
        except GetTimeoutError as exc:
            raise BackendError(
                f"ray backend: {what} timed out after {self.timeout:g}s; raise call_timeout_s "
                "or check the cluster (ray status)"
            ) from exc
        except RayActorError as exc:
            raise BackendError(f"ray backend: {what} failed, its actor died: {exc}") from exc

    def _restart_rollout(self, i: int) -> None:
        try:
            ray.kill(self._rollout[i])
        except RayError:
            pass
        actor = self._new_rollout(i)
        self._rollout[i] = actor  # close() kills it even when it never became ready
        self._get(actor.ready.remote(), f"restart of rollout worker {i}")
        self._push_weights([actor])

    def _on_rollouts(self, method: str, args_for: Any) -> list[Any]:
        """Call ``method`` on every rollout worker; restart a failed worker once and retry."""
        refs = {i: getattr(a, method).remote(*args_for(i)) for i, a in enumerate(self._rollout)}
        out: dict[int, Any] = {}
        for i, ref in refs.items():
            try:
                out[i] = ray.get(ref, timeout=self.timeout)
                continue
            except (GetTimeoutError, RayActorError) as exc:
                first = exc
            try:
                self._restart_rollout(i)
                out[i] = ray.get(
                    getattr(self._rollout[i], method).remote(*args_for(i)), timeout=self.timeout
                )
            except (GetTimeoutError, RayActorError, BackendError) as exc:
                raise BackendError(
                    f"ray backend: rollout worker {i} failed twice on {method} "
                    f"(first: {type(first).__name__}, then: {type(exc).__name__}: {exc}); "
                    "check the worker logs (ray logs) or raise call_timeout_s"
                ) from exc
        return [out[i] for i in range(len(self._rollout))]

    # -- PolicyBackend ------------------------------------------------------------------
    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation]:
        """Shard the conversations over the rollout workers in contiguous blocks, keep order.

        With one worker the call equals the inner backend's ``generate``; with several, shard
        ``k`` samples with seed ``params.seed + k`` (when a seed is given).
        """
        convs = [list(c) for c in conversations]
        tool_list = list(tools) if tools is not None else None
        n = len(self._rollout)
        bounds = [(len(convs) * k // n, len(convs) * (k + 1) // n) for k in range(n)]

        def args_for(k: int) -> tuple[Any, ...]:
            lo, hi = bounds[k]
            p = params
            if n > 1 and params.seed is not None:
                from dataclasses import replace

                p = replace(params, seed=params.seed + k)
            return (convs[lo:hi], p, tool_list[lo:hi] if tool_list is not None else None)

        if not convs:
            return []
        return [g for shard in self._on_rollouts("generate", args_for) for g in shard]

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One update on the trainer actor (weights reach the rollout side on publish)."""
        return self._get(self._trainer.train_step.remote(list(samples)), "train_step")

    def train_step_async(self, samples: Sequence[TrainSample]) -> Any:
        """Start the update on the trainer actor; the returned function waits for its metrics
        (rollout workers keep generating with the last published weights meanwhile)."""
        ref = self._trainer.train_step.remote(list(samples))
        return lambda: self._get(ref, "train_step")

    def save(self, path: Path) -> None:
        """Checkpoint through the inner trainer (the path must be reachable from its node)."""
        self._get(self._trainer.save.remote(str(Path(path).resolve())), "save")

    def load(self, path: Path) -> None:
        """Restore the inner trainer, then publish its weights to the rollout workers."""
        self._get(self._trainer.load.remote(str(Path(path).resolve())), "load")
        self.publish_weights()

    def publish_weights(self) -> None:
        """Send the trainer's current weights to every rollout worker."""
        if self.sglang_url:
            target = self._own_dir / "published"
            tmp = self._own_dir / "published.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            self._get(self._trainer.save_hf.remote(str(tmp)), "write weights for SGLang")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
            self._published_dir = str(target)
        else:
            state_ref = self._trainer.state_dict.remote()
            if self._get(state_ref, "read trainer weights") is None:
                # Disk fallback: the inner backend's own checkpoint, loaded by every worker.
                target = self._own_dir / "published"
                shutil.rmtree(target, ignore_errors=True)
                self._get(self._trainer.save.remote(str(target)), "weight checkpoint")
                self._published, self._published_dir = None, str(target)
            else:
                self._published, self._published_dir = state_ref, None
        self._push_weights(None)

    def _push_weights(self, actors: list[Any] | None) -> None:
        if self.sglang_url:
            method, arg = "update_from_disk", self._published_dir
        elif self._published is not None:
            method, arg = "set_weights", self._published
        elif self._published_dir is not None:
            method, arg = "load", self._published_dir
        else:
            return
        if actors is None:
            self._on_rollouts(method, lambda _i: (arg,))
        else:
            for actor in actors:
                self._get(getattr(actor, method).remote(arg), f"weight update ({method})")

    def close(self) -> None:
        """Kill the actors and free the placement group (the Ray session stays up)."""
        for actor in [self._trainer, *self._rollout]:
            try:
                ray.kill(actor)
            except RayError:
                pass
        try:
            remove_placement_group(self._pg)
        except RayError:
            pass
        shutil.rmtree(self._own_dir, ignore_errors=True)


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
        _prepare_process(threads, None)
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
