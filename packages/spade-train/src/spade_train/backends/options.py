"""The typed ``backend.options`` of each built-in backend, checked when a recipe loads.

A recipe's ``backend`` section has the fields every backend shares (model, lr, clip…, see
:class:`spade_train.config.BackendConfig`) and ``options``: the backend's own settings, one
pydantic model per backend, unknown keys refused. The ``ray`` backend's options hold the inner
backend's name and that backend's options (``inner_options``), checked against the inner
backend's model, so a misplaced option fails at load with its key path.

:meth:`BackendOptions.plan` builds every object the backend would build on its way to the
device (placement-group bundles, the Megatron parallel layout, Tinker's loss and optimizer
settings) and stops where CUDA, SGLang, a model's weights or the Tinker service would be
touched. ``spade train --dry-run`` prints it; a test builds it for every shipped recipe.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

ALL_COMMON = frozenset(
    {
        "model",
        "device",
        "dtype",
        "lr",
        "weight_decay",
        "grad_clip",
        "micro_batch_size",
        "micro_batch_tokens",
        "clip_eps",
        "clip_eps_high",
        "kl_coef",
        "entropy_coef",
        "lora",
        "max_seq_len",
        "gen_batch_size",
        "gradient_checkpointing",
        "tis_clip",
        "tis_clip_low",
    }
)


class BackendOptions(BaseModel):
    """Base of every backend's options: strict (unknown keys refused), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    COMMON: ClassVar[frozenset[str]] = ALL_COMMON
    """The shared ``backend.*`` fields this backend honours; the others it ignores."""

    def flat(self) -> dict[str, Any]:
        """These options as the flat keyword arguments of the backend's constructor."""
        return self.model_dump()

    def plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        """What the backend would build, without touching a device (see the module doc)."""
        return {"ignored": ignored_fields(self.COMMON, common, defaults)}

    def honours(self) -> tuple[str, frozenset[str]]:
        """``(who, keys)``: the backend that trains (for ``ray``, its inner one) and the
        shared ``backend.*`` keys it honours. A key it does not honour fails ``spade train``
        (``--dry-run`` included) and never shows as matched in cmd/README.md's table."""
        return "", self.COMMON


def ignored_fields(
    honoured: frozenset[str], common: dict[str, Any], defaults: dict[str, Any]
) -> list[str]:
    """Shared fields set away from their default that a backend does not honour."""
    return sorted(k for k, v in common.items() if k not in honoured and defaults.get(k) != v)


class LocalOptions(BackendOptions):
    """PyTorch + transformers in this process (the embedded default)."""

    betas: tuple[float, float] = (0.9, 0.999)
    threads: int | Literal["auto"] = "auto"
    """torch's CPU threads: ``auto`` gives it the CPUs other processes leave free, re-judged
    before every generation and train step (oversubscribed OpenMP threads cost 5-7x)."""
    reuse_kv: bool = True
    """Keep each generated row's keys and values and feed a later prompt that extends it only
    its new tokens (multi-turn play; same tokens, log-probs within float rounding)."""

    def plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        model = str(common.get("model", ""))
        kind = model.split(":", 1)[0] if model.split(":", 1)[0] in ("embedded", "tiny") else "path"
        return {
            **super().plan(common, defaults),
            "model": model,
            "model_kind": kind,
            "device": common.get("device", "auto"),
            "dtype": common.get("dtype", "auto"),
            "lora": bool(common.get("lora")),
            "reference_model": bool(common.get("kl_coef")) and not common.get("lora"),
        }


class MegatronOptions(BackendOptions):
    """Megatron-core ``GPTModel`` training of a Qwen3 HF checkpoint (GPUs; CPU for small
    models). Its world is ``world_layout`` of these options: the plan is what the launch builds."""

    # The Megatron trainer's declared support: a shared key joins this set once the trainer
    # applies it (and a test shows it does); until then a recipe that sets it fails
    # `spade train` with one line naming the key. All but LoRA (tests/test_megatron.py).
    COMMON: ClassVar[frozenset[str]] = ALL_COMMON - {"lora"}
    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    expert_parallel: int = Field(1, ge=1)
    sequence_parallel: bool = False
    world_size: int | None = Field(None, ge=1)
    """Ranks of the trainer's world, one GPU each; None: tensor x pipeline x expert parallel."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's betas (upstream's launchers: ``--adam-beta2 0.98``)."""

    def plan(
        self, common: dict[str, Any], defaults: dict[str, Any], world_size: float | None = None
    ) -> dict[str, Any]:
        """``world_size`` here: the GPUs a placement gives the trainer, when the caller knows
        (shown beside the world, which comes from these options alone, as at launch)."""
        from spade_train.backends.megatron_world import world_layout

        layout = world_layout(self.model_dump())
        given = {} if world_size is None else {"trainer_gpus_given": world_size}
        return {
            **super().plan(common, defaults),
            "model": common.get("model"),
            **layout.plan(),
            **given,
            "dtype": common.get("dtype", "auto"),
            "micro_batch": {
                "rows": common.get("micro_batch_size"),
                "tokens": common.get("micro_batch_tokens"),
            },  # fmt: skip
            "recompute": "full layers" if common.get("gradient_checkpointing") else "off",
            "loss": {
                "kl_coef": common.get("kl_coef", 0.0),
                "tis_clip": common.get("tis_clip"),
                "reference_model": bool(common.get("kl_coef")),
            },  # fmt: skip
        }


class TinkerOptions(BackendOptions):
    """LoRA training and sampling on the Tinker service (needs TINKER_API_KEY)."""

    COMMON: ClassVar[frozenset[str]] = frozenset(
        {"model", "lr", "weight_decay", "grad_clip", "clip_eps", "clip_eps_high", "lora"}
        | {"max_seq_len"}
    )
    lora_rank: int = Field(32, ge=1)
    betas: tuple[float, float] = (0.9, 0.95)
    loss: Literal["ppo", "importance_sampling"] = "ppo"
    call_timeout_s: float = Field(900.0, gt=0)
    base_url: str | None = None

    def plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        from spade_train.backends.tinker import adam_params, loss_config

        adam = adam_params(
            float(common.get("lr", 1e-5)),
            self.betas,
            float(common.get("weight_decay", 0.0)),
            float(common.get("grad_clip", 1.0)),
        )
        return {
            **super().plan(common, defaults),
            "model": common.get("model"),
            "lora_rank": self.lora_rank,
            "loss": self.loss,
            "loss_fn_config": loss_config(
                self.loss, float(common.get("clip_eps", 0.2)), common.get("clip_eps_high")
            ),
            "adam": {"learning_rate": adam.learning_rate, "beta1": adam.beta1, "beta2": adam.beta2},
        }


class SGLangOptions(BaseModel):
    """The SGLang engines a GPU recipe launches (``backend.options.sglang``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tp_size: int = Field(1, ge=1)
    """GPUs per engine (``--tp-size``); engines = rollout_gpus / tp_size."""
    mem_fraction_static: float = Field(0.7, gt=0, le=1)
    deterministic: bool = True
    """``--enable-deterministic-inference``: per-request seeds honoured, runs reproducible."""
    memory_saver: bool = False
    context_length: int | None = Field(None, ge=16)
    """``--context-length``; None: ``backend.max_seq_len``."""
    sync: Literal["auto", "distributed", "tensor", "disk"] = "auto"
    group_backend: Literal["nccl", "gloo"] = "nccl"
    bucket_mib: int = Field(512, ge=1)
    publish_dir: str | None = None
    """For ``sync: disk``: a directory every node mounts (checked before the first publish)."""
    router: bool = False
    """Put ``sglang_router`` in front of the engines (else requests go to them in turn)."""
    concurrency: int = Field(256, ge=1)
    request_base_s: float = Field(60.0, gt=0)
    request_per_token_s: float = Field(0.05, ge=0)
    request_max_s: float = Field(3600.0, gt=0)
    start_timeout_s: float = Field(900.0, gt=0)
    python: str | None = None
    """The interpreter that runs the server (None: the actor's own)."""
    module: str = "sglang.launch_server"
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class RayOptions(BackendOptions):
    """A trainer and rollout engines on a Ray cluster.

    GPU recipes set ``sglang`` (engines launched on the placement), ``trainer_gpus`` and
    ``rollout_gpus``; without ``sglang`` the rollout side is ``num_rollout_workers`` actors
    running the inner backend (CPU runs and tests)."""

    inner: str = "local"
    """The backend the trainer (and CPU rollout actors) run: ``local`` or ``megatron``."""
    inner_options: dict[str, Any] = Field(default_factory=dict)
    """The inner backend's own options, checked against its model."""
    num_rollout_workers: int = Field(1, ge=1)
    num_trainers: Literal[1] = 1
    colocate: bool = True
    num_cpus_per_worker: float = Field(1.0, gt=0)
    num_gpus_per_worker: float = Field(0.0, ge=0)
    call_timeout_s: float = Field(600.0, gt=0)
    ray_address: str | None = None
    ray_num_cpus: int | None = Field(None, ge=1)
    worker_threads: int | None = Field(1, ge=1)
    inner_import: str | None = None
    """A module the actors import first (an inner backend registered outside spade-train)."""
    trainer_gpus: int = Field(0, ge=0)
    """GPUs (one bundle and one Megatron rank each) of the trainer; GPU recipes only."""
    rollout_gpus: int = Field(0, ge=0)
    """GPUs of the SGLang engines (colocated: a share of the trainer's)."""
    cpus_per_gpu: float = Field(1.0, ge=0)
    gpus_per_node: int = Field(8, ge=1)
    """The node size the dry run checks the placement against (the launch checks the cluster)."""
    max_restarts: int = Field(3, ge=0)
    """Restarts Ray gives each SGLang server actor (its node lost, its process dead)."""
    sglang: SGLangOptions | None = None

    def inner_model(self) -> BackendOptions:
        from spade_train.backends.base import backend_spec

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
        from spade_train.backends.placement import PlacementSpec
        from spade_train.backends.sglang_server import server_command

        assert self.sglang is not None
        sg = self.sglang.model_dump()
        spec = PlacementSpec(
            self.trainer_gpus, self.rollout_gpus, sg["tp_size"], self.colocate, self.cpus_per_gpu
        )
        inner = self.inner_model()
        if isinstance(inner, MegatronOptions):
            inner_plan = inner.plan(common, defaults, world_size=self.trainer_gpus)
        else:
            inner_plan = inner.plan(common, defaults)
        server = server_spec({**common, **self.flat()}, sg, resolve=False)
        command = server_command(server, "<node-ip>", 0, 0)
        command = [c if c != "0" or command[i - 1] != "--port" else "<free-port>"
                   for i, c in enumerate(command)]  # fmt: skip
        return {
            "placement_group": spec.bundles(),
            "placement": spec.plan(self.gpus_per_node),
            "trainer": {"inner": self.inner, "ranks": self.trainer_gpus},
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
