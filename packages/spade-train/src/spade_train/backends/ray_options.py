"""The ``ray`` backend's typed options: its own, the SGLang engines' (``sglang``), and the inner
backend's (``inner_options``), checked against the model the inner backend registered
(:mod:`spade_train.backends.registry`), so a misplaced option fails at load with its key path."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from spade_train.backends.options import BackendOptions, MegatronOptions
from spade_train.backends.registry import backend_spec
from spade_train.config_base import MAX_COUNT


class SGLangOptions(BaseModel):
    """The SGLang engines a GPU recipe launches (``backend.options.sglang``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    tp_size: int = Field(1, ge=1, le=MAX_COUNT)
    """GPUs per engine (``--tp-size``); engines = rollout_gpus / tp_size."""
    mem_fraction_static: float = Field(0.7, gt=0, le=1)
    """``--mem-fraction-static``: the share of GPU memory SGLang takes for weights and KV cache."""
    deterministic: bool = True
    """``--enable-deterministic-inference``: per-request seeds honoured, runs reproducible."""
    memory_saver: bool = False
    """``--enable-memory-saver``: colocated engines release their GPU memory while the trainer steps."""
    context_length: int | None = Field(None, ge=16)
    """``--context-length``; None: ``backend.max_seq_len``."""
    sync: Literal["auto", "distributed", "tensor", "disk"] = "auto"
    """How weights reach the engines: ``distributed`` (a process group, broadcast from trainer rank 0), ``tensor`` (colocated), ``disk`` (a shared directory); ``auto`` picks by placement."""
    group_backend: Literal["nccl", "gloo"] = "nccl"
    """The process-group backend of ``distributed`` weight sync (``gloo`` only in CPU tests)."""
    bucket_mib: int = Field(512, ge=1)
    """Size of one weight bucket sent to the engines."""
    publish_dir: str | None = None
    """For ``sync: disk``: a directory every node mounts (checked before the first publish)."""
    router: bool = False
    """Put ``sglang_router`` in front of the engines (else requests go to them in turn)."""
    concurrency: int = Field(256, ge=1)
    """Requests in flight at once over all engines."""
    request_base_s: float = Field(60.0, gt=0)
    """A request's time limit: this base ..."""
    request_per_token_s: float = Field(0.05, ge=0)
    """... plus this much per requested new token."""
    request_max_s: float = Field(3600.0, gt=0)
    """The longest time limit a request gets, whatever its length."""
    start_timeout_s: float = Field(900.0, gt=0)
    """How long an engine may take to answer ``/health`` after launch."""
    python: str | None = None
    """The interpreter that runs the server (None: the actor's own)."""
    module: str = "sglang.launch_server"
    """The module run as the server (``python -m MODULE``)."""
    extra_args: list[str] = Field(default_factory=list)
    """More command-line arguments for the server."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server process."""


class RayOptions(BackendOptions):
    """A trainer and rollout engines on a Ray cluster.

    GPU recipes set ``sglang`` (engines launched on the placement), ``trainer_gpus`` and
    ``rollout_gpus``; without ``sglang`` the rollout side is ``num_rollout_workers`` actors
    running the inner backend (CPU runs and tests)."""

    inner: str = "local"
    """The backend the trainer (and CPU rollout actors) run: ``local`` or ``megatron``."""
    inner_options: dict[str, Any] = Field(default_factory=dict)
    """The inner backend's own options, checked against its model."""
    num_rollout_workers: int = Field(1, ge=1, le=MAX_COUNT)
    """CPU shape: rollout actors that generate with their own copy of the policy."""
    num_trainers: Literal[1] = 1
    """Trainer actors (one: the inner backend scales over its own ranks)."""
    colocate: bool = True
    """Trainer and rollout engines share GPUs (CPU shape: one bundle for both)."""
    num_cpus_per_worker: float = Field(1.0, gt=0)
    """CPU shape: CPUs of each placement-group bundle."""
    num_gpus_per_worker: float = Field(0.0, ge=0)
    """CPU shape: GPUs of each placement-group bundle."""
    call_timeout_s: float = Field(600.0, gt=0)
    """The longest one call to an actor may take; a rollout worker past it is restarted."""
    ray_address: str | None = None
    """The Ray cluster to join; None: start a local one."""
    ray_num_cpus: int | None = Field(None, ge=1, le=MAX_COUNT)
    """CPUs of the local Ray cluster when one is started (None: all)."""
    worker_threads: int | None = Field(1, ge=1, le=MAX_COUNT)
    """torch threads in each actor (None: torch's default)."""
    inner_import: str | None = None
    """A module the actors import first (an inner backend registered outside spade-train)."""
    trainer_gpus: int = Field(0, ge=0)
    """GPUs (one bundle and one Megatron rank each) of the trainer; GPU recipes only."""
    rollout_gpus: int = Field(0, ge=0)
    """GPUs of the SGLang engines (colocated: a share of the trainer's)."""
    cpus_per_gpu: float = Field(1.0, ge=0)
    """CPUs in each per-GPU bundle."""
    gpus_per_node: int = Field(8, ge=1)
    """The node size the dry run checks the placement against (the launch checks the cluster)."""
    max_restarts: int = Field(3, ge=0)
    """Restarts Ray gives each SGLang server actor (its node lost, its process dead)."""
    sglang: SGLangOptions | None = None
    """GPU recipes: the SGLang engines the backend launches; None: the CPU shape."""

    @model_validator(mode="after")
    def _world_fits_the_gpus(self) -> RayOptions:
        """A GPU recipe's Megatron world must be its trainer GPUs (refused at load)."""
        if self.sglang is not None:
            from spade_train.backends.gpu_world import gpu_world
            from spade_train.errors import SpadeTrainError

            try:
                gpu_world(self.model_dump())
            except SpadeTrainError as exc:
                raise ValueError(str(exc)) from None
        return self

    def inner_model(self) -> BackendOptions:
        return backend_spec(self.inner).options.model_validate(self.inner_options)

    def honours(self) -> tuple[str, frozenset[str]]:
        """The inner backend trains, so its declared support is the ray backend's."""
        who, keys = self.inner_model().honours()
        return who or self.inner, keys

    def flat(self) -> dict[str, Any]:
        out = self.model_dump(exclude={"inner_options"})
        out.update(self.inner_model().flat())
        return out

    def plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        if self.sglang is not None:
            return self._gpu_plan(common, defaults)
        cpus, gpus = self.num_cpus_per_worker, self.num_gpus_per_worker
        bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
        n_bundles = 1 if self.colocate else 1 + self.num_rollout_workers
        inner = self.inner_model()
        return {
            "placement_group": [dict(bundle) for _ in range(n_bundles)],
            "trainer": {"inner": self.inner, "cpus": cpus / 2 if self.colocate else cpus},
            "rollout": {"workers": self.num_rollout_workers, "engine": self.inner},
            "inner": inner.plan(common, defaults),
        }

    def _gpu_plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        from spade_train.backends.gpu_shape import server_spec, sync_mode_text
        from spade_train.backends.gpu_world import gpu_world
        from spade_train.backends.sglang_server import server_command

        assert self.sglang is not None
        sg = self.sglang.model_dump()
        world = gpu_world(self.model_dump())
        spec = world.spec
        inner = self.inner_model()
        if isinstance(inner, MegatronOptions) and world.megatron is not None:
            inner_plan = inner.plan(common, defaults, world_size=world.megatron.world_size)
        else:
            inner_plan = inner.plan(common, defaults)
        server = server_spec({**common, **self.flat()}, sg, resolve=False)
        command = server_command(server, "<node-ip>", 0, 0)
        command = [c if c != "0" or command[i - 1] != "--port" else "<free-port>"
                   for i, c in enumerate(command)]  # fmt: skip
        return {
            "placement_group": spec.bundles(),
            "placement": spec.plan(self.gpus_per_node),
            "trainer": {"inner": self.inner, "ranks": world.ranks},
            "world": world.plan(),
            "engines": {
                "count": spec.n_engines,
                "tp_size": spec.engine_tp,
                "command": " ".join(["python"] + command[1:]),
                "router": "sglang_router in front" if sg["router"] else "none (round robin)",
            },
            "weight_sync": sync_mode_text(sg, spec),
            "requests": (
                f"one per conversation, up to {sg['concurrency']} in flight, timeout "
                f"{sg['request_base_s']:g} s + {sg['request_per_token_s']:g} s x max_new_tokens"
            ),
            "inner": inner_plan,
        }
