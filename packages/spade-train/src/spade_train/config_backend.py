"""The sampling and backend sections of a run configuration (``spade_train.config``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, model_validator

from spade_train.backends.options import BackendOptions, ignored_fields
from spade_train.backends.ray_options import RayOptions
from spade_train.backends.registry import backend_spec
from spade_train.config_base import MAX_COUNT, MAX_TOKENS, Strict
from spade_train.errors import RegistryError
from spade_train.types import SamplingParams


class SamplingConfig(Strict):
    max_new_tokens: int = Field(256, ge=1, le=MAX_TOKENS)
    """The most tokens of one reply."""
    temperature: float = Field(1.0, ge=0.0)
    """Sampling temperature (0: greedy)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling: sample from the smallest set of tokens whose probability reaches this (1:
    off)."""
    top_k: int = Field(0, ge=0, le=MAX_COUNT)
    """Sample from the k most likely tokens (0: off)."""
    stop: list[str] = Field(default_factory=list)
    """Extra stop strings (the completion ends with the one that stopped it)."""
    balanced_stop: bool = False
    """A stop string counts only outside braces the reply opened itself (local backend)."""
    enable_thinking: bool | None = None
    """Thinking mode for templates that have one (Qwen3 ``enable_thinking``); ``None`` leaves
    the template's default. Set per role: ``designer.sampling`` and ``agent.sampling``."""

    def to_params(self, seed: int | None = None) -> SamplingParams:
        """These settings as backend :class:`SamplingParams` with ``seed``."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            stop=tuple(self.stop),
            balanced_stop=self.balanced_stop,
            seed=seed,
            enable_thinking=self.enable_thinking,
        )


class BackendConfig(Strict):
    name: str = "local"
    """A registered backend (``spade_train.backends.available_backends()``)."""
    model: str = "embedded:smollm2-135m"
    """The policy's weights: ``embedded:NAME`` (shipped with spade-train), ``tiny:NAME`` (a random
    model built from a config, for tests), or a Hugging Face model directory or id."""
    device: str = "auto"
    """``auto`` (a GPU when there is one), ``cpu`` or ``cuda[:N]``."""
    dtype: str = "auto"
    """``auto``, ``float32``, ``bfloat16`` or ``float16``."""
    lr: float = Field(1e-5, gt=0.0)
    """The optimizer's learning rate."""
    weight_decay: float = Field(0.0, ge=0.0)
    """AdamW's decoupled weight decay."""
    grad_clip: float = Field(1.0, ge=0.0)
    """Clip the gradient's global norm to this before each step (0: no clipping)."""
    micro_batch_size: int = Field(4, ge=1, le=MAX_COUNT)
    """Rows per forward/backward pass; the gradients of a step's micro-batches are summed (the same
    step, less memory)."""
    micro_batch_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """Also cut a micro-batch before its rows times its longest row would pass this many
    tokens (same gradient, bounded peak memory; the local backend honours it). None:
    ``micro_batch_size`` rows."""
    clip_eps: float = Field(0.2, gt=0.0)
    """PPO's clip: the ratio to the sampling policy is clipped to ``[1 - clip_eps, 1 +
    clip_eps_high]``."""
    clip_eps_high: float | None = None
    """The upper clip of the ratio; None: ``clip_eps``."""
    kl_coef: float = Field(0.0, ge=0.0)
    """Weight of the KL penalty to the initial policy (0: none; a reference model is kept when it is
    set)."""
    entropy_coef: float = 0.0
    """Weight of an entropy bonus on the trained tokens (0: none)."""
    lora: dict[str, Any] | None = None
    """LoRA adapters instead of full fine-tuning (``{r, alpha, target_modules, ...}``, peft's
    ``LoraConfig``); None: full fine-tuning."""
    max_seq_len: int = Field(2048, ge=16, le=MAX_TOKENS)
    """The longest token sequence (prompt and reply) the policy sees; longer prompts are cut."""
    gen_batch_size: int = Field(16, ge=1, le=MAX_COUNT)
    """Conversations generated at once (local backend)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, slower)."""
    tis_clip: float | None = Field(None, gt=0.0)
    """Truncated importance sampling: each token's loss weighted by
    ``clamp(exp(current - rollout log-prob), tis_clip_low, tis_clip)`` (the paper launchers:
    2.0); ``None`` turns it off. Matters for delayed and overlapped (off-policy) samples."""
    tis_clip_low: float = Field(0.0, ge=0.0)
    """The lower clamp of the truncated importance weight."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The backend's own options, checked against its model (``spade_train.backends.options``)."""

    @model_validator(mode="after")
    def _options(self) -> BackendConfig:
        self.typed_options()
        return self

    def typed_options(self) -> BackendOptions:
        """``options`` as the backend's typed model; ValueError naming the key otherwise."""
        try:
            spec = backend_spec(self.name)
        except RegistryError as exc:
            raise ValueError(f"name: {exc}") from None
        try:
            typed = spec.options.model_validate(self.options)
            if isinstance(typed, RayOptions):
                try:
                    typed.inner_model()
                except ValidationError as exc:
                    raise _nested(exc, "options.inner_options", typed.inner) from None
        except RegistryError as exc:
            raise ValueError(f"options.inner: {exc}") from None
        except ValidationError as exc:
            raise _nested(exc, "options", self.name) from None
        return typed

    def common(self) -> dict[str, Any]:
        """The fields every backend shares (all but ``name`` and ``options``)."""
        return self.model_dump(exclude={"name", "options"})

    def backend_kwargs(self, seed: int) -> dict[str, Any]:
        """Keyword arguments for ``make_backend(name, **kwargs)``: the shared fields, the typed
        options flattened over them (for ``ray``: its own and the inner backend's), the seed."""
        kwargs = self.common()
        kwargs.update(self.typed_options().flat())
        kwargs["seed"] = seed
        return kwargs

    def plan(self) -> dict[str, Any]:
        """What the backend would build, stopping at the device (see ``BackendOptions.plan``)."""
        defaults = {k: f.default for k, f in BackendConfig.model_fields.items()}
        return {"backend": self.name, **self.typed_options().plan(self.common(), defaults)}

    def unhonoured(self) -> tuple[str, list[str]]:
        """``(backend, keys)``: the backend that trains (for ``ray``, its inner one) and the
        shared keys set away from their default that it does not honour (its declared
        support, ``BackendOptions.honours``)."""
        defaults = {k: f.default for k, f in BackendConfig.model_fields.items()}
        who, keys = self.typed_options().honours()
        return who or self.name, ignored_fields(keys, self.common(), defaults)

    def check_honoured(self) -> None:
        """A ValueError (one line) naming every set key the training backend would ignore."""
        who, keys = self.unhonoured()
        if keys:
            names = ", ".join(f"backend.{k}" for k in keys)
            them = "them" if len(keys) > 1 else "it"
            raise ValueError(
                f"{names}: not honoured by the {who} backend (it would train as if unset); "
                f"remove {them} from the recipe or choose a backend that honours {them} "
                "(declared in spade_train/backends/options.py)"
            )


def _nested(exc: ValidationError, prefix: str, backend: str) -> ValueError:
    err = exc.errors()[0]
    path = ".".join([prefix, *(str(p) for p in err["loc"])])
    if err["type"] == "extra_forbidden":
        return ValueError(f"{path}: not an option of the {backend} backend")
    return ValueError(f"{path}: {err['msg']} (got {err.get('input')!r})")
