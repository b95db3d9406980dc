"""The ``ray`` backend: the same PolicyBackend, spread over Ray actors.

Two shapes. **GPU recipes** (``backend.options.sglang`` set): a placement of one bundle per GPU
(:mod:`~spade_train.backends.placement`), the trainer on its bundles (the inner backend: a
Megatron world of one actor per rank, or ``local``), and SGLang servers launched on theirs
(:mod:`~spade_train.backends.sglang_fleet`); rollouts are requests from this process to the
servers, and each publish sends the weights to every server once, in memory (or from a shared
directory), with a weight version checked on every answer. **CPU runs**: a trainer actor and
``num_rollout_workers`` rollout actors, each an inner backend, weights passed through the
object store.

Every ``ray.get`` has a timeout (``call_timeout_s``). A rollout worker or server that dies is
restarted (a server by Ray, up to ``max_restarts``, once its bundle has a node again) and its
requests retried elsewhere meanwhile; a trainer failure raises :class:`BackendError` (resume
the run from its last checkpoint). Nothing waits forever.

:class:`RaySandboxPool` puts sandboxes on actors: ``validate_many`` shards, and agent episodes
(``open_env``, a drop-in for ``spade_sandbox.SandboxPool`` in ``spade_envs.SandboxedFactory``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from spade_train.backends.ray_workers import (
    LocalRolloutActor,
    TrainerActor,
    probe_sites,
)
from spade_train.errors import BackendError, RolloutError
from spade_train.types import Generation, Message, SamplingParams, TrainSample


class RayBackend:
    """PolicyBackend orchestrating a trainer and rollout engines on Ray (see the module doc)."""

    name = "ray"

    def __init__(
        self,
        inner: str = "local",
        num_rollout_workers: int = 1,
        num_trainers: int = 1,
        colocate: bool = True,
        num_cpus_per_worker: float = 1.0,
        num_gpus_per_worker: float = 0.0,
        call_timeout_s: float = 600.0,
        ray_address: str | None = None,
        ray_num_cpus: int | None = None,
        worker_threads: int | None = 1,
        inner_import: str | None = None,
        trainer_gpus: int = 0,
        rollout_gpus: int = 0,
        cpus_per_gpu: float = 1.0,
        gpus_per_node: int | None = None,
        max_restarts: int = 3,
        sglang: dict[str, Any] | None = None,
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
        self._threads, self._import = worker_threads, inner_import
        if not ray.is_initialized():
            if ray_address:
                ray.init(address=ray_address, ignore_reinit_error=True)
            else:
                ray.init(num_cpus=ray_num_cpus, include_dashboard=False, ignore_reinit_error=True)
        self._own_dir = Path(tempfile.mkdtemp(prefix="spade-ray-"))
        self._published: Any = None
        self._published_dir: str | None = None
        self._rollout: list[Any] = []
        self.fleet: Any = None
        self.publishes = 0
        if sglang is not None:
            self._start_gpu_shape(
                trainer_gpus, rollout_gpus, colocate, cpus_per_gpu, sglang, max_restarts
            )
        else:
            self._start_cpu_shape(
                num_rollout_workers, colocate, num_cpus_per_worker, num_gpus_per_worker
            )
        self.publish_weights()

    # -- starting ------------------------------------------------------------------------
    def _start_cpu_shape(self, n: int, colocate: bool, cpus: float, gpus: float) -> None:
        bundle = {"CPU": float(cpus), **({"GPU": float(gpus)} if gpus else {})}
        # Colocated: each rollout worker shares the trainer's bundle; else one bundle per actor.
        n_bundles = 1 if colocate else 1 + n
        self._pg = placement_group([dict(bundle) for _ in range(n_bundles)], strategy="PACK")
        self._get(self._pg.ready(), "placement group (not enough CPUs/GPUs in the cluster?)")
        self._colocate, self._cpus, self._gpus, self._n_rollout = (
            colocate,
            float(cpus),
            float(gpus),
            n,
        )
        res = (cpus / 2, gpus / 2) if colocate else (cpus, gpus)
        self._trainer = self._spawn(TrainerActor, 0, res, self.inner, self.options)
        self._get(self._trainer.ready.remote(), "trainer actor start")
        self._rollout = [self._new_rollout(i) for i in range(n)]
        for i, actor in enumerate(self._rollout):
            self._get(actor.ready.remote(), f"rollout worker {i} start")

    def _start_gpu_shape(
        self,
        trainer_gpus: int,
        rollout_gpus: int,
        colocate: bool,
        cpus_per_gpu: float,
        sglang: dict[str, Any],
        max_restarts: int,
    ) -> None:
        from spade_train.backends.gpu_shape import fleet_settings, server_spec, start_trainer
        from spade_train.backends.gpu_world import gpu_world
        from spade_train.backends.placement import assign, check_fits
        from spade_train.backends.sglang_fleet import SGLangFleet

        world = gpu_world({
            "inner": self.inner, "inner_options": self.options, "trainer_gpus": trainer_gpus,
            "rollout_gpus": rollout_gpus, "colocate": colocate, "cpus_per_gpu": cpus_per_gpu,
            "sglang": sglang,
        })  # fmt: skip
        spec = world.spec
        check_fits(spec, alive_nodes())
        self._pg = placement_group(spec.bundles(), strategy="PACK")
        self._get(self._pg.ready(), "placement group")
        layout = assign(spec, probe_sites(self._pg, spec.n_bundles, self.timeout))
        self.layout = layout
        self._trainer = start_trainer(self, world, layout)
        self._get(self._trainer.ready.remote(), "trainer start")
        server = server_spec(self.options, sglang)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(server.model_path)
        trainer_node = layout.trainer[0].node
        same_node = all(s.node == trainer_node for span in layout.engines for s in span)
        self.fleet = SGLangFleet(
            server,
            layout,
            self._pg,
            spec.engine_share(),
            tokenizer,
            fleet_settings(sglang, self.timeout, max_restarts),
            same_node,
        )

    def _spawn(self, cls: type, bundle: int, res: tuple[float, float], *args: Any) -> Any:
        strategy = PlacementGroupSchedulingStrategy(
            placement_group=self._pg, placement_group_bundle_index=bundle
        )
        remote: Any = ray.remote(num_cpus=res[0], num_gpus=res[1], max_restarts=0)(cls)
        return remote.options(scheduling_strategy=strategy).remote(
            *args, self._threads, self._import
        )

    def _new_rollout(self, i: int) -> Any:
        bundle = 0 if self._colocate else 1 + i
        share = 2 * self._n_rollout
        res = (
            (self._cpus / share, self._gpus / share) if self._colocate else (self._cpus, self._gpus)
        )
        return self._spawn(LocalRolloutActor, bundle, res, self.inner, self.options)

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
    def generate_each(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation | RolloutError]:
        """Like :meth:`generate`, but a failed request is its typed error in the list (SGLang
        engines); with local rollout workers every entry is a Generation or the call raises."""
        if self.fleet is not None:
            return self.fleet.generate_each(conversations, params, tools, self._push)
        return list(self.generate(conversations, params, tools))

    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation]:
        """Every conversation once, in order.

        SGLang engines: one request each, its seed derived from ``params.seed`` and its index;
        a request no retry could save raises its :class:`RolloutError`. Local rollout workers:
        contiguous shards, shard ``k`` seeded ``params.seed + k`` (one worker: the inner
        backend's own ``generate``)."""
        if not conversations:
            return []
        if self.fleet is not None:
            results = self.generate_each(conversations, params, tools)
            for r in results:
                if isinstance(r, RolloutError):
                    raise r
            return [r for r in results if isinstance(r, Generation)]
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

        return [g for shard in self._on_rollouts("generate", args_for) for g in shard]

    def _engines_sleep(self) -> bool:
        sleeping = self.fleet is not None and self.fleet.spec.memory_saver
        if sleeping:
            self.fleet.sleep()
        return sleeping

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One update on the trainer (weights reach the rollout side on publish). Colocated
        engines with ``memory_saver`` release their GPU memory meanwhile."""
        sleeping = self._engines_sleep()
        try:
            return self._get(self._trainer.train_step.remote(list(samples)), "train_step")
        finally:
            if sleeping:
                self.fleet.wake()

    def train_step_async(self, samples: Sequence[TrainSample]) -> Any:
        """Start the update on the trainer; the returned function waits for its metrics
        (rollouts go on with the last published weights meanwhile, unless colocated engines
        sleep through it: then the update runs before this returns)."""
        if self.fleet is not None and self.fleet.spec.memory_saver:
            metrics = self.train_step(samples)
            return lambda: metrics
        ref = self._trainer.train_step.remote(list(samples))
        return lambda: self._get(ref, "train_step")

    def save(self, path: Path) -> None:
        """Checkpoint through the inner trainer (the path must be reachable from its node)."""
        self._get(self._trainer.save.remote(str(Path(path).resolve())), "save")

    def load(self, path: Path) -> None:
        """Restore the inner trainer, then publish its weights to the rollout side."""
        self._get(self._trainer.load.remote(str(Path(path).resolve())), "load")
        self.publish_weights()

    def _push(self, job: Any) -> Any:
        return self._get(self._trainer.push_weights.remote(job), f"weight push ({job.mode})")

    def publish_weights(self) -> None:
        """Send the trainer's current weights to the rollout side (each server once)."""
        self.publishes += 1
        if self.fleet is not None:
            self.fleet.publish(str(self.publishes), self._push)
            return
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
        if self._published is not None:
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
        """Stop the servers, kill the actors, free the placement group (Ray stays up)."""
        if self.fleet is not None:
            self.fleet.close()
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


def alive_nodes() -> list[Any]:
    """The alive nodes' GPU and CPU counts, for the placement's fit check."""
    from spade_train.backends.placement import NodeResources

    out = []
    for n in ray.nodes():
        if n.get("Alive"):
            res = n.get("Resources", {})
            node = str(n.get("NodeID", "?"))[:12]
            out.append(NodeResources(node, res.get("GPU", 0.0), res.get("CPU", 0.0)))
    return out


from spade_train.backends.ray_sandbox import RaySandboxPool  # noqa: E402,F401  (re-exported)

__all__ = ["RayBackend", "RaySandboxPool"]
