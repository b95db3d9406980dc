"""How an agent's reply becomes an action: the last ``<action>…</action>``, else the last
balanced ``\\boxed{…}``, else the last fenced block; a reply with none of them is malformed
(sent as it is, or re-prompted, as the runner is told)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ParsedAction", "parse_action"]


@dataclass(frozen=True)
class ParsedAction:
    """``action`` to send to the environment; ``malformed`` when the reply had no action."""

    action: str
    malformed: bool
    source: Literal["action_tag", "boxed", "fence", "none"]


_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def last_boxed(text: str) -> str | None:
    """The last balanced ``\\boxed{...}`` of ``text`` (an unbalanced one is skipped), or None."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, i = 0, start + len("\\boxed")
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
            i += 1
        start = text.rfind("\\boxed{", 0, start)  # unbalanced: try an earlier one
    return None


def parse_action(reply: str) -> ParsedAction:
    """Extract the action from an agent reply (see the module docstring for the rules)."""
    tags = _ACTION_TAG.findall(reply)
    if tags:
        return ParsedAction(tags[-1].strip(), False, "action_tag")
    boxed = last_boxed(reply)
    if boxed is not None:
        return ParsedAction(boxed, False, "boxed")
    fences = _FENCE.findall(reply)
    if fences:
        return ParsedAction(fences[-1].strip(), False, "fence")
    return ParsedAction(reply, True, "none")
