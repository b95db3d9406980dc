"""Model clients: every one implements ``complete(batch, sampling) -> list[str]``.

``batch`` is a list of chats (lists of ``{"role", "content"}``); ``sampling`` holds
``temperature``, ``top_p``, ``max_tokens`` and optionally ``seed``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from .errors import EvalConfigError, ModelError

Chat = list[dict[str, str]]


class ModelClient(Protocol):
    """What the runner needs from a model."""

    name: str

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]: ...


class OpenAIClient:
    """An OpenAI-compatible endpoint (``POST {base_url}/v1/chat/completions``).

    At most ``concurrency`` requests are in flight; each has ``timeout_s``; 5xx, 429, timeouts
    and connection errors are retried ``max_retries`` times, waiting ``backoff_s * 2**attempt``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
    ) -> None:
        if concurrency < 1:
            raise EvalConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.name = model
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.requests = 0

    async def _one(self, http: httpx.AsyncClient, chat: Chat, sampling: dict[str, Any]) -> str:
        body = {"model": self.name, "messages": chat, **sampling}
        url = f"{self.base_url}/v1/chat/completions"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.requests += 1
            try:
                resp = await http.post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = type(exc).__name__
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                last = f"HTTP {resp.status_code}"
                continue
            if resp.status_code != 200:
                raise ModelError(f"{url}: HTTP {resp.status_code}: {resp.text[:200]}")
            try:
                return resp.json()["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                raise ModelError(f"{url}: not a chat completion: {resp.text[:200]}") from None
        raise ModelError(f"{url}: failed after {self.max_retries + 1} attempts (last: {last})")

    async def acomplete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """Async ``complete``: ``concurrency`` lanes, each with its own one-connection client.

        One pool per lane because httpcore's shared pool costs O(connections x requests) per
        event, which made 64 concurrent requests slower than 16.
        """
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        replies: list[str] = [""] * len(batch)
        todo = iter(range(len(batch)))

        async def lane() -> None:
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(
                timeout=self.timeout_s, headers=headers, limits=limits
            ) as http:
                for i in todo:
                    replies[i] = await self._one(http, batch[i], sampling)

        await asyncio.gather(*(lane() for _ in range(min(self.concurrency, len(batch)))))
        return replies

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """Replies to ``batch`` in order; raises ModelError when a request fails for good."""
        return asyncio.run(self.acomplete(batch, sampling))


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
