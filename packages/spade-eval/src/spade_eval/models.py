"""Model clients: every one implements ``complete(batch, sampling) -> list[str]``.

``batch`` is a list of chats (lists of ``{"role", "content"}``); ``sampling`` holds
``temperature``, ``top_p``, ``max_tokens`` and optionally ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import spade_envs as se

from .errors import EvalConfigError, ModelError

Chat = list[dict[str, str]]


class ModelClient(Protocol):
    """What the runner needs from a model."""

    name: str

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]: ...


class OpenAIClient:
    """An OpenAI-compatible endpoint through :class:`spade_envs.Endpoint` (the official SDK).

    ``base_url`` is the server root or its ``/v1``; ``self.base_url`` is the normalised
    ``.../v1`` that the external suites hand to their harnesses. At most ``concurrency``
    requests are in flight; each HTTP attempt has ``timeout_s``; connection errors, timeouts,
    429 and 5xx are retried ``max_retries`` times with the SDK's backoff. ``requests`` counts
    the HTTP attempts, retries included.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 4,
    ) -> None:
        if concurrency < 1:
            raise EvalConfigError(f"concurrency must be at least 1, got {concurrency}")
        if max_retries < 0 or timeout_s <= 0:
            raise EvalConfigError(
                f"max retries must be >= 0 and the timeout > 0, got {max_retries}, {timeout_s}"
            )
        try:
            self.endpoint = se.Endpoint(
                base_url, model, api_key=api_key, timeout_s=timeout_s,
                max_retries=max_retries, concurrency=concurrency,
            )  # fmt: skip
        except se.EndpointError as exc:
            raise EvalConfigError(str(exc)) from None
        self.base_url = self.endpoint.base_url
        self.name = model
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries

    @property
    def requests(self) -> int:
        """HTTP attempts sent so far, retries included."""
        return self.endpoint.requests

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """Replies to ``batch`` in order; raises ModelError when a request fails for good."""
        try:
            return self.endpoint.complete_many(batch, **sampling)  # type: ignore[arg-type]
        except se.EndpointError as exc:
            raise ModelError(str(exc)) from None


class CallableClient:
    """Wraps ``fn(batch, sampling) -> list[str]`` (spade-train's in-loop eval backend)."""

    def __init__(
        self, fn: Callable[[list[Chat], dict[str, Any]], list[str]], name: str = "callable"
    ):
        self.fn = fn
        self.name = name

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """Replies from ``fn``; a wrong count is a ModelError."""
        out = list(self.fn(batch, sampling))
        if len(out) != len(batch):
            raise ModelError(f"{self.name}: returned {len(out)} replies for {len(batch)} chats")
        return out


class HFClient:
    """A local Hugging Face checkpoint (directory with a chat template) through transformers;
    batched, left-padded generation. torch/transformers are imported here (extra ``hf``)."""

    def __init__(self, path: str, batch_size: int = 8, device: str = "auto") -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise EvalConfigError("local checkpoints need pip install 'spade-eval[hf]'") from None
        self.torch = torch
        self.name = path
        self.batch_size = batch_size
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
            self.model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EvalConfigError(f"{path}: not a loadable checkpoint ({first})") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.device = device

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """Generate replies ``batch_size`` chats at a time."""
        texts = [
            str(self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True))
            for c in batch
        ]
        return self.complete_text(texts, sampling)

    def complete_text(self, prompts: list[str], sampling: dict[str, Any]) -> list[str]:
        """Continue raw prompt texts (already templated), ``batch_size`` at a time."""
        out: list[str] = []
        temperature = float(sampling.get("temperature", 0.0))
        gen: dict[str, Any] = {"max_new_tokens": int(sampling.get("max_tokens", 256))}
        if temperature > 0:
            gen |= {
                "do_sample": True,
                "temperature": temperature,
                "top_p": sampling.get("top_p", 1.0),
            }
        else:
            gen |= {"do_sample": False}
        for i in range(0, len(prompts), self.batch_size):
            texts = prompts[i : i + self.batch_size]
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = enc.to(self.device)
            with self.torch.no_grad():
                ids = self.model.generate(**enc, **gen, pad_token_id=self.tokenizer.pad_token_id)
            new = ids[:, enc["input_ids"].shape[1] :]
            out.extend(self.tokenizer.batch_decode(new, skip_special_tokens=True))
        return out
