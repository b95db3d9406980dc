"""The ``tinker`` backend: the PolicyBackend interface over Tinker's training/sampling clients.

Training runs as a LoRA training client on the Tinker service (``forward_backward`` with the
``ppo`` or ``importance_sampling`` loss, then ``optim_step`` with Adam); generation goes through a
sampling client made from the latest weights (:meth:`TinkerBackend.publish_weights`). Needs
``TINKER_API_KEY`` and the network.

A :class:`~spade_train.types.TrainSample` of tokens ``t_0..t_{n-1}`` becomes one ``Datum``:
input ``t_0..t_{n-2}``, ``target_tokens`` ``t_1..t_{n-1}``, and per target position the sampling
``logprobs`` and ``advantages`` (the sample's advantage where ``loss_mask`` is 1, else 0, so
prompt and observation tokens carry no loss).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tinker

from spade_train.backends.render import render_prompt
from spade_train.errors import BALANCED_STOP_UNSUPPORTED, BackendError
from spade_train.types import Generation, Message, SamplingParams, TrainSample

LOSSES = ("ppo", "importance_sampling")


def sample_to_datum(sample: TrainSample) -> tinker.Datum:
    """One training sample as a Tinker ``Datum`` (next-token targets, shifted by one)."""
    ids = sample.input_ids
    if len(ids) < 2:
        raise BackendError(f"a TrainSample needs at least 2 tokens for Tinker, got {len(ids)}")
    mask = sample.loss_mask[1:]
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(list(ids[:-1])),
        loss_fn_inputs={
            # plain lists are accepted and converted by Tinker (its stubs say TensorData)
            "target_tokens": list(ids[1:]),  # type: ignore[dict-item]
            "logprobs": [float(x) for x in sample.old_logprobs[1:]],  # type: ignore[dict-item]
            "advantages": [float(sample.advantage) * m for m in mask],  # type: ignore[dict-item]
        },
    )


def loss_config(loss: str, clip_eps: float, clip_eps_high: float | None) -> dict[str, float] | None:
    """``loss_fn_config`` for Tinker's ``ppo`` loss (ratio clipped to [1-eps, 1+eps_high])."""
    if loss not in LOSSES:
        raise BackendError(f"tinker loss {loss!r} is not supported; choose one of {LOSSES}")
    if loss != "ppo":
        return None
    high = clip_eps if clip_eps_high is None else clip_eps_high
    return {"clip_low_threshold": 1.0 - clip_eps, "clip_high_threshold": 1.0 + high}


def adam_params(
    lr: float, betas: Sequence[float], weight_decay: float, grad_clip: float = 1.0
) -> tinker.AdamParams:
    """Tinker's Adam settings for one optimizer step."""
    return tinker.AdamParams(
        learning_rate=lr,
        beta1=float(betas[0]),
        beta2=float(betas[1]),
        weight_decay=weight_decay,
        grad_clip_norm=grad_clip,
    )


def tinker_sampling_params(params: SamplingParams) -> tinker.SamplingParams:
    """Our sampling parameters in Tinker's form (top_k 0 → -1, i.e. off)."""
    if params.balanced_stop:
        raise BackendError(BALANCED_STOP_UNSUPPORTED.format(backend="tinker"))
    return tinker.SamplingParams(
        max_tokens=params.max_new_tokens,
        seed=params.seed,
        stop=list(params.stop) or None,
        temperature=params.temperature,
        top_k=params.top_k if params.top_k > 0 else -1,
        top_p=params.top_p,
    )


def completion_budget(prompt_tokens: int, max_new_tokens: int, max_seq_len: int) -> int:
    """New tokens one request may sample: ``max_new_tokens``, cut so that prompt and
    completion fit ``max_seq_len`` (upstream's ``max_context_length``), at least 1."""
    return max(1, min(max_new_tokens, max_seq_len - prompt_tokens))


def _wait(future: Any, timeout: float | None) -> Any:
    return future.result(timeout=timeout) if hasattr(future, "result") else future


class TinkerBackend:
    """PolicyBackend on the Tinker service (LoRA fine-tuning of a hosted base model)."""

    name = "tinker"

    def __init__(
        self,
        model: str = "Qwen/Qwen3-8B",
        lora_rank: int = 32,
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        betas: Sequence[float] = (0.9, 0.95),
        grad_clip: float = 1.0,
        clip_eps: float = 0.2,
        clip_eps_high: float | None = None,
        loss: str = "ppo",
        seed: int = 0,
        call_timeout_s: float = 900.0,
        api_key: str | None = None,
        base_url: str | None = None,
        lora: dict[str, Any] | None = None,
        max_seq_len: int = 32768,
        **_ignored: Any,
    ) -> None:
        key = api_key or os.environ.get("TINKER_API_KEY")
        if not key:
            raise BackendError(
                "the tinker backend needs TINKER_API_KEY; export it (https://tinker-console.thinkingmachines.ai)"
            )
        self.loss, self.loss_cfg = loss, loss_config(loss, clip_eps, clip_eps_high)
        self.adam = adam_params(lr, betas, weight_decay, grad_clip)
        self.model, self.timeout, self.step = model, call_timeout_s, 0
        self.max_seq_len = max_seq_len
        rank = int((lora or {}).get("r", lora_rank))
        try:
            self.service = tinker.ServiceClient(api_key=key, base_url=base_url)
            self.trainer = _wait(
                self.service.create_lora_training_client(base_model=model, rank=rank, seed=seed),
                self.timeout,
            )
            self.tokenizer = self.trainer.get_tokenizer()
        except tinker.TinkerError as exc:
            raise BackendError(
                f"tinker: could not start a training run for {model}: {exc}"
            ) from exc
        self.sampler: Any = None
        self.publish_weights()

    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation]:
        """Sample one completion per conversation through the current sampling client."""
        tool_list = list(tools) if tools is not None else [None] * len(conversations)
        prompts = [
            render_prompt(self.tokenizer, c, t, params.enable_thinking)
            for c, t in zip(conversations, tool_list, strict=True)
        ]
        futures = []
        for p in prompts:
            budget = completion_budget(len(p), params.max_new_tokens, self.max_seq_len)
            sp = tinker_sampling_params(dataclasses.replace(params, max_new_tokens=budget))
            futures.append(
                self.sampler.sample(
                    prompt=tinker.ModelInput.from_ints(p), num_samples=1, sampling_params=sp
                )
            )
        out = []
        for prompt, fut in zip(prompts, futures, strict=True):
            seq = _wait(fut, self.timeout).sequences[0]
            ids, lps = list(seq.tokens), [float(x) for x in seq.logprobs]
            finish = "length" if str(seq.stop_reason).endswith("length") else "stop"
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            out.append(Generation(text, prompt, ids, lps, finish))  # type: ignore[arg-type]
        return out

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """``forward_backward`` on the joint batch, then one Adam ``optim_step``."""
        if not samples:
            raise BackendError("train_step got no samples")
        datums = [sample_to_datum(s) for s in samples]
        fb = self.trainer.forward_backward(datums, self.loss, self.loss_cfg)
        opt = self.trainer.optim_step(self.adam)
        result = _wait(fb, self.timeout)
        _wait(opt, self.timeout)
        self.step += 1
        tokens = float(sum(sum(s.loss_mask[1:]) for s in samples))
        metrics = {k: float(v) for k, v in (result.metrics or {}).items()}
        loss_sum = metrics.get("loss:sum", math.nan)
        metrics.update(
            loss=loss_sum / max(tokens, 1.0),
            tokens=tokens,
            grad_norm=metrics.get("grad_norm:mean", math.nan),
            clip_frac=metrics.get("clip_frac:mean", math.nan),
        )
        return metrics

    def save(self, path: Path) -> None:
        """Save the training state on Tinker and write its URI into ``path/tinker.json``."""
        saved = _wait(self.trainer.save_state(name=f"step-{self.step:06d}"), self.timeout)
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / "tinker.json.tmp"
        tmp.write_text(
            json.dumps({"state_path": saved.path, "model": self.model, "step": self.step})
        )
        os.replace(tmp, path / "tinker.json")

    def load(self, path: Path) -> None:
        """Restore the Tinker state named in ``path/tinker.json`` and republish the weights."""
        file = Path(path) / "tinker.json"
        if not file.exists():
            raise BackendError(f"{file} is missing: {path} is not a tinker checkpoint")
        meta = json.loads(file.read_text())
        _wait(self.trainer.load_state(meta["state_path"]), self.timeout)
        self.step = int(meta["step"])
        self.publish_weights()

    def publish_weights(self) -> None:
        """Snapshot the current weights into a new sampling client."""
        self.sampler = _wait(
            self.trainer.save_weights_and_get_sampling_client(name=f"sampler-{self.step:06d}"),
            self.timeout,
        )

    def close(self) -> None:
        """Nothing is held locally beyond the HTTP clients."""
