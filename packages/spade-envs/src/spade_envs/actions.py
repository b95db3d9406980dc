"""How an agent's reply becomes an action: the last ``<action>…</action>``, else its boxed
answer (:func:`boxed_answer`, the project's one boxed-answer parser) sent re-boxed, else the
last fenced block; a reply with none of them is malformed (sent as it is, or re-prompted, as the
runner is told)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ParsedAction", "boxed", "boxed_answer", "parse_action"]


@dataclass(frozen=True)
class ParsedAction:
    """``action`` to send to the environment; ``malformed`` when the reply had no action."""

    action: str
    malformed: bool
    source: Literal["action_tag", "boxed", "fence", "none"]


_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


#: The simple boxes tried in order, first match wins: one, two or three brace layers around
#: content that holds no brace (``\\boxed{42}``, ``\\boxed{{42}}``, ``\\boxed{{{42}}}``).
_SIMPLE_BOXES = tuple(
    re.compile(r"\\boxed" + r"\{" * n + r"([^{}]+)" + r"\}" * n) for n in (1, 2, 3)
)


def boxed_answer(text: str) -> str | None:
    """The answer a reply gives in ``\\boxed{...}``, read as the released SPADE code reads it.

    The one parser of boxed answers in this project (training, judges and evaluation call it):

    1. the FIRST box whose content holds no brace wins, its content stripped; then the first
       box wrapped in one redundant brace layer (``\\boxed{{42}}``), then in two;
    2. else the LAST ``\\boxed`` whose braces balance (``\\boxed{\\frac{1}{2}}``), its content
       stripped with up to two redundant outer brace layers removed;
    3. else ``None`` (no box, or only an unbalanced one).
    """
    if not text:
        return None
    for pattern in _SIMPLE_BOXES:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    at = text.rfind("\\boxed")
    start = text.find("{", at) if at >= 0 else -1
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            content = text[start + 1 : i].strip()
            for _ in range(2):
                if content.startswith("{") and content.endswith("}"):
                    content = content[1:-1].strip()
            return content
    return None


def boxed(answer: str) -> str:
    """``answer`` written as a boxed action, ``\\boxed{answer}``."""
    return f"\\boxed{{{answer}}}"


def parse_action(reply: str) -> ParsedAction:
    """Extract the action from an agent reply (see the module docstring for the rules)."""
    tags = _ACTION_TAG.findall(reply)
    if tags:
        return ParsedAction(tags[-1].strip(), False, "action_tag")
    answer = boxed_answer(reply)
    if answer is not None:
        return ParsedAction(boxed(answer), False, "boxed")
    fences = _FENCE.findall(reply)
    if fences:
        return ParsedAction(fences[-1].strip(), False, "fence")
    return ParsedAction(reply, True, "none")
