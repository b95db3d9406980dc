"""Parts of the local backend (``backends/local.py``) that need none of its state: the
generation tick that lets the thread governor re-judge, the trainable model (LoRA adapters or a
frozen reference copy for KL) and each role's metrics of a training step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import StoppingCriteria

from spade_train.backends.threads import ThreadGovernor
from spade_train.types import TrainSample


class Tick(StoppingCriteria):
    """Never stops generation: lets the thread governor re-judge between decoding steps."""

    def __init__(self, governor: ThreadGovernor):
        self.governor = governor

    def __call__(
        self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any
    ) -> torch.Tensor:
        self.governor.tick()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def trainable(
    model: torch.nn.Module, lora: dict[str, Any] | None, kl_coef: float
) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """The model to train (LoRA adapters when ``lora``: r 8, alpha 16, attention projections
    unless set) and, for a KL penalty on full weights, a frozen copy as the reference."""
    if lora:
        from peft import LoraConfig, get_peft_model

        options = dict(lora)
        options.setdefault("r", 8)
        options["lora_alpha"] = options.pop("alpha", options.get("lora_alpha", 16))
        options.setdefault("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"])
        return get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **options)), None
    if kl_coef:
        import copy

        return model, copy.deepcopy(model).eval().requires_grad_(False)
    return model, None


def role_metrics(samples: Sequence[TrainSample]) -> dict[str, float]:
    """Each role's trained tokens and mean advantage."""
    out = {}
    for role in ("agent", "designer"):
        mine = [s for s in samples if s.role == role]
        out[f"{role}/tokens"] = float(sum(sum(s.loss_mask) for s in mine))
        out[f"{role}/advantage_mean"] = sum(s.advantage for s in mine) / len(mine) if mine else 0.0
    return out
