"""The GPU shape of the ray backend, from its options: the SGLang server spec, the fleet's
settings and the trainer on its bundles. The dry run (``RayOptions.plan``) and the launch
(``RayBackend``) both build these from the same options with these functions."""

from __future__ import annotations

import sys
from typing import Any

from spade_train.backends.gpu_world import GpuWorld
from spade_train.backends.placement import Layout, PlacementSpec
from spade_train.backends.rollout_client import RequestTiming
from spade_train.backends.sglang_fleet import FleetSettings
from spade_train.backends.sglang_server import ServerSpec
from spade_train.errors import BackendError


def server_spec(
    options: dict[str, Any], sglang: dict[str, Any], resolve: bool = True
) -> ServerSpec:
    """The server every engine runs: the policy's model, ``sglang`` options, the recipe's
    ``max_seq_len`` as context length and ``dtype``, the run's seed."""
    model = str(options.get("model", ""))
    if resolve and model.split(":", 1)[0] in ("tiny", "embedded"):
        from spade_train.models import resolve_model

        model = str(resolve_model(model))
    dtype = str(options.get("dtype", "auto"))
    return ServerSpec(
        model_path=model,
        tp_size=int(sglang.get("tp_size", 1)),
        context_length=sglang.get("context_length") or options.get("max_seq_len"),
        mem_fraction_static=float(sglang.get("mem_fraction_static", 0.7)),
        dtype=dtype,
        seed=int(options.get("seed", 0)),
        deterministic=bool(sglang.get("deterministic", True)),
        memory_saver=bool(sglang.get("memory_saver", False)),
        extra_args=tuple(sglang.get("extra_args", ())),
        module=str(sglang.get("module", "sglang.launch_server")),
        python=str(sglang.get("python") or sys.executable),
        start_timeout_s=float(sglang.get("start_timeout_s", 900.0)),
    )


def fleet_settings(
    sglang: dict[str, Any], call_timeout_s: float, max_restarts: int
) -> FleetSettings:
    return FleetSettings(
        sync=sglang.get("sync", "auto"),
        group_backend=str(sglang.get("group_backend", "nccl")),
        bucket_bytes=int(sglang.get("bucket_mib", 512)) << 20,
        publish_dir=sglang.get("publish_dir"),
        router=bool(sglang.get("router", False)),
        concurrency=int(sglang.get("concurrency", 256)),
        timing=RequestTiming(
            float(sglang.get("request_base_s", 60.0)),
            float(sglang.get("request_per_token_s", 0.05)),
            float(sglang.get("request_max_s", 3600.0)),
        ),
        max_restarts=max_restarts,
        call_timeout_s=call_timeout_s,
        env=tuple(sorted((str(k), str(v)) for k, v in dict(sglang.get("env", {})).items())),
    )


def sync_mode_text(sglang: dict[str, Any], spec: PlacementSpec) -> str:
    mode = sglang.get("sync", "auto")
    if mode != "auto":
        return str(mode)
    return (
        "auto: update_weights_from_tensor when every engine shares the trainer's node "
        "(colocated, NCCL), else update_weights_from_distributed"
        if spec.colocate
        else "auto: update_weights_from_distributed (trainer rank 0 broadcasts to every engine GPU)"
    )


def start_trainer(backend: Any, world: GpuWorld, layout: Layout) -> Any:
    """The trainer actor: ``local`` on rank 0's bundle; ``megatron`` on the driver's node,
    starting its world (:func:`~spade_train.backends.gpu_world.gpu_world`, the dry run's) of one
    actor per rank on the trainer's bundles, in node order."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from spade_train.backends.ray_workers import TrainerActor

    options = dict(backend.options)
    remote: Any = ray.remote(TrainerActor)
    args = (backend.inner, options, backend._threads, backend._import)
    spec = world.spec
    if world.megatron is not None:
        options.update(
            world_size=world.megatron.world_size,
            placement_group=backend._pg,
            bundle_indices=[s.bundle for s in layout.trainer],
        )
        return remote.options(num_cpus=0, max_restarts=0).remote(*args)
    if spec.trainer_gpus != 1:
        raise BackendError(
            f"inner backend {backend.inner!r} trains in one process: trainer_gpus must be 1, "
            f"got {spec.trainer_gpus} (use inner: megatron for a world of ranks)"
        )
    strategy = PlacementGroupSchedulingStrategy(backend._pg, layout.trainer[0].bundle)
    return remote.options(
        num_cpus=0, num_gpus=spec.trainer_share(), max_restarts=0, scheduling_strategy=strategy
    ).remote(*args)
