"""Chat-template rendering shared by the backends (no dependencies beyond a tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spade_train.types import Message

__all__ = ["render_prompt"]


def render_prompt(
    tokenizer: Any,
    conversation: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    enable_thinking: bool | None = None,
) -> list[int]:
    """Token ids of ``conversation`` rendered with the chat template and generation prompt.

    A conversation that ends with an assistant message is a prefill: the prompt ends inside
    that message (no end-of-turn after it) and the completion continues its text.
    ``enable_thinking`` is handed to the template when set (Qwen3 reads it)."""
    kwargs: dict[str, Any] = {"tools": list(tools)} if tools else {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    conversation = [dict(m) for m in conversation]
    if conversation and conversation[-1].get("role") == "assistant":
        kwargs["continue_final_message"] = True
    else:
        kwargs["add_generation_prompt"] = True
    text = tokenizer.apply_chat_template(conversation, tokenize=False, **kwargs)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
