"""Agents for :func:`spade_envs.run_episodes` that need no model: a seeded random guesser, a
replay of fixed replies, a random tool caller; and an agent backed by any OpenAI-compatible
chat endpoint."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from .chat import Message
from .endpoint import Endpoint

__all__ = ["RandomAgent", "ReplayAgent", "OpenAIChatAgent", "RandomToolAgent"]


_WORD = re.compile(r"-?\d+|[A-Za-z]+")


class RandomAgent:
    """A seeded random guesser: ``\\boxed{token}`` with a token from the last observation or a small integer.

    Stateless between calls: the choice depends only on ``seed`` and the chat so far, so a batch
    of episodes replays exactly.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def __call__(self, messages: list[Message]) -> str:
        last = messages[-1]["content"] if messages else ""
        rng = random.Random(f"{self.seed}:{len(messages)}:{last}")
        tokens = _WORD.findall(last)
        token = rng.choice(tokens) if tokens and rng.random() < 0.5 else str(rng.randint(0, 20))
        return f"\\boxed{{{token}}}"


class ReplayAgent:
    """Replays a fixed list of replies: the n-th assistant turn gets ``replies[n]`` (the last repeats)."""

    def __init__(self, replies: Sequence[str]):
        if not replies:
            raise ValueError("ReplayAgent needs at least one reply")
        self.replies = list(replies)

    def __call__(self, messages: list[Message]) -> str:
        turn = sum(m["role"] == "assistant" for m in messages)
        return self.replies[min(turn, len(self.replies) - 1)]


class OpenAIChatAgent:
    """An agent backed by an OpenAI-compatible chat endpoint (:class:`spade_envs.Endpoint`).

    ``base_url`` is the server root or its ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``); the key
    is ``api_key``, else ``$OPENAI_API_KEY``, else ``EMPTY`` (local servers need none). The SDK
    retries connection errors, timeouts and 429/5xx answers ``retries`` times; a call that
    fails for good raises :class:`~spade_envs.EndpointError` (the episode's agent error).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        timeout_s: float = 60.0,
        retries: int = 3,
        concurrency: int = 8,
    ):
        self.endpoint = Endpoint(
            base_url,
            model,
            api_key=api_key,
            timeout_s=timeout_s,
            max_retries=retries,
            concurrency=concurrency,
        )
        self.temperature, self.max_tokens = temperature, max_tokens

    def __call__(self, messages: list[Message]) -> str:
        return self.endpoint.complete(
            messages, temperature=self.temperature, max_tokens=self.max_tokens
        )

    def batch(self, batch: list[list[Message]]) -> list[str]:
        """Reply to many chats concurrently (up to ``concurrency`` requests in flight)."""
        return self.endpoint.complete_many(
            batch, temperature=self.temperature, max_tokens=self.max_tokens
        )


class RandomToolAgent:
    """A seeded random tool user: random calls with schema-shaped random arguments, or a random answer.

    ``accepts_tools = True``: it is given each chat's tools. Values are drawn from the schema
    (enums, bounded numbers) or from tokens of the last message; about one reply in four is a
    final answer ``\\boxed{token}``. Stateless, so batches replay exactly.
    """

    accepts_tools = True

    def __init__(self, seed: int = 0, answer_rate: float = 0.25):
        self.seed = seed
        self.answer_rate = answer_rate

    def _value(self, schema: dict[str, Any], rng: random.Random, tokens: list[str]) -> Any:
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type", "string")
        kind = rng.choice(kind) if isinstance(kind, list) else kind
        if kind in ("integer", "number"):
            low, high = schema.get("minimum", 0), schema.get("maximum", 100)
            return (
                rng.randint(int(low), int(high))
                if kind == "integer"
                else round(rng.uniform(low, high), 2)
            )
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return [
                self._value(schema.get("items", {}), rng, tokens) for _ in range(rng.randint(0, 2))
            ]
        if kind == "object":
            return {k: self._value(v, rng, tokens) for k, v in schema.get("properties", {}).items()}
        return rng.choice(tokens) if tokens else str(rng.randint(0, 9))

    def reply(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> str:
        last = messages[-1]["content"] if messages else ""
        rng = random.Random(f"{self.seed}:{len(messages)}:{last}")
        tokens = _WORD.findall(last)
        if not tools or rng.random() < self.answer_rate:
            token = rng.choice(tokens) if tokens and rng.random() < 0.5 else str(rng.randint(0, 20))
            return f"\\boxed{{{token}}}"
        tool = rng.choice(tools)
        args = self._value(tool.get("parameters", {"type": "object"}), rng, tokens)
        return (
            "<tool_call>" + json.dumps({"name": tool["name"], "arguments": args}) + "</tool_call>"
        )

    def __call__(
        self, batch: list[list[Message]], tools: list[list[dict[str, Any]] | None] | None = None
    ) -> list[str]:
        tools = tools or [None] * len(batch)
        return [self.reply(m, t) for m, t in zip(batch, tools, strict=True)]
