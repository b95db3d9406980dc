"""Data types shared by the self-play loop and every policy backend.

A backend only ever sees these: chat conversations to complete, sampling parameters,
and token-level training samples. Everything about environments, rewards and pools
stays in the loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role = Literal["agent", "designer"]
ROLES: tuple[Role, ...] = ("agent", "designer")

Message = dict[str, Any]
"""A chat message: ``{"role": "system"|"user"|"assistant"|"tool", "content": str, ...}``."""

ToolSpec = dict[str, Any]
"""An OpenAI-style tool spec: ``{"type": "function", "function": {name, description,
parameters}}`` (``parameters`` a JSON schema)."""

JSON: TypeAlias = "None | bool | int | float | str | Sequence[JSON] | Mapping[str, JSON]"
"""A value JSON can hold: what a metrics row, a design record and a checkpoint's state are."""
Metrics: TypeAlias = "dict[str, JSON]"
"""A cycle's metrics row (or part of one): ``metrics.jsonl`` holds one per cycle."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion per conversation."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k filtering."""
    stop: tuple[str, ...] = ()
    """Extra stop strings; the tokenizer's end-of-turn token always stops."""
    balanced_stop: bool = False
    """A stop string counts only outside braces the completion opened itself (a ``}`` stop
    then ends a reply at the brace that closes a prompt-opened ``\\boxed{``, not at an inner
    one). Local backend only; the others refuse it."""
    seed: int | None = None
    """Seed for this batch; ``None`` continues the backend's own generator."""
    enable_thinking: bool | None = None
    """Passed to chat templates that read it (Qwen3's ``enable_thinking``); ``None`` leaves
    the template's default. Set per role: the designer's and the agent's calls differ."""


@dataclass
class Generation:
    """One sampled completion with the exact tokens the policy saw and produced."""

    text: str
    """Decoded completion, without the end-of-turn token."""
    prompt_ids: list[int]
    """The rendered conversation (chat template, generation prompt included)."""
    completion_ids: list[int]
    """Sampled tokens, the end-of-turn token included when sampling stopped on it."""
    logprobs: list[float]
    """Log-probability of each completion token under the sampling policy (len == completion_ids)."""
    finish_reason: Literal["stop", "length"] = "stop"


@dataclass
class TrainSample:
    """One token sequence of the joint batch.

    ``loss_mask[i] == 1`` marks tokens the policy generated (the loss is taken only there);
    prompt and observation tokens are 0. ``old_logprobs[i]`` is the sampling log-probability
    of token ``i`` (0.0 where the mask is 0). All three lists have the same length.
    """

    input_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]
    advantage: float
    role: Role
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.old_logprobs) != n:
            raise ValueError(
                f"TrainSample lists differ in length: input_ids={n}, "
                f"loss_mask={len(self.loss_mask)}, old_logprobs={len(self.old_logprobs)}"
            )
        if self.role not in ROLES:
            raise ValueError(f"TrainSample role must be one of {ROLES}, got {self.role!r}")

    def with_advantage(self, advantage: float) -> TrainSample:
        """The same tokens with ``advantage`` set."""
        return dataclasses.replace(self, advantage=float(advantage))
