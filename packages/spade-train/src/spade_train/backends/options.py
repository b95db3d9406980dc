"""The typed ``backend.options`` of the built-in backends, checked when a recipe loads (the
``ray`` backend's, which name an inner backend, are in :mod:`spade_train.backends.ray_options`).

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

from spade_train.config_base import MAX_COUNT

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

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
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
    """AdamW's betas."""
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
    tensor_parallel: int = Field(1, ge=1, le=MAX_COUNT)
    """Tensor-parallel size (GPUs each layer is split over)."""
    pipeline_parallel: int = Field(1, ge=1, le=MAX_COUNT)
    """Pipeline-parallel size (stages the layers are split into)."""
    expert_parallel: int = Field(1, ge=1, le=MAX_COUNT)
    """Expert-parallel size (MoE models)."""
    sequence_parallel: bool = False
    """Split the sequence over the tensor-parallel ranks too."""
    world_size: int | None = Field(None, ge=1, le=MAX_COUNT)
    """Ranks of the trainer's world, one GPU each; None: tensor x pipeline x expert parallel."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's betas (upstream's launchers: ``--adam-beta2 0.98``)."""

    def plan(
        self, common: dict[str, Any], defaults: dict[str, Any], world_size: int | None = None
    ) -> dict[str, Any]:
        """``world_size``: the ranks a GPU placement gives the trainer (``gpu_world``, as at
        launch); None: these options alone (``world_size``, else tp x pp x ep)."""
        from spade_train.backends.megatron_world import world_layout

        dump = self.model_dump()
        layout = world_layout(dump if world_size is None else {**dump, "world_size": world_size})
        return {
            **super().plan(common, defaults),
            "model": common.get("model"),
            **layout.plan(),
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
    lora_rank: int = Field(32, ge=1, le=MAX_COUNT)
    """The rank of Tinker's LoRA adapter."""
    betas: tuple[float, float] = (0.9, 0.95)
    """Adam's betas."""
    loss: Literal["ppo", "importance_sampling"] = "ppo"
    """Tinker's loss: ``ppo`` (clipped ratio) or ``importance_sampling``."""
    call_timeout_s: float = Field(900.0, gt=0)
    """The longest one call to the Tinker service may take."""
    base_url: str | None = None
    """The Tinker service's URL; None: its default."""

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
