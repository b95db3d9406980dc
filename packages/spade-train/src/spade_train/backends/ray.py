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

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from spade_train.backends.ray_sandbox import prepare_process as _prepare_process
from spade_train.backends.registry import make_backend
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


from spade_train.backends.ray_sandbox import RaySandboxPool  # noqa: E402,F401  (re-exported)

__all__ = ["RayBackend", "RaySandboxPool"]
