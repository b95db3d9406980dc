"""Where a reply ends on a stop string, optionally only outside braces it opened itself.

With ``SamplingParams.balanced_stop`` a stop string counts only where every ``{`` the reply
itself opened is closed again. The quickstart's agent replies after a runner-written
``\\boxed{`` and stops at ``}``: with a plain stop, ``\\text{6}`` inside the box ended the
reply at its own brace and left the box open (a malformed turn); a balanced stop ends it at
the ``}`` that closes the box. The local backend implements it; others refuse it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import StoppingCriteria


def first_stop(text: str, stops: Sequence[str], balanced: bool = False) -> int | None:
    """The end (exclusive) of the first stop string in ``text``, or None. With ``balanced``
    a stop inside braces that ``text`` opened is skipped (a ``}`` there closes one of them)."""
    if not balanced:
        found = [i + len(s) for s in stops if (i := text.find(s)) != -1]
        return min(found) if found else None
    depth = 0
    for i, ch in enumerate(text):
        if depth == 0:
            for s in stops:
                if text.startswith(s, i):
                    return i + len(s)
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
    return None


class BalancedStop(StoppingCriteria):
    """Stops each row once its text since ``start`` holds a balanced stop (see module doc).
    A row that stopped stays stopped (a stop in a prefix stays in every longer text), so it
    is not decoded again."""

    def __init__(self, decode: Callable[[list[int]], str], stops: Sequence[str], start: int):
        self.decode, self.stops, self.start = decode, tuple(stops), start
        self.done: list[bool] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        if len(self.done) != len(input_ids):
            self.done = [False] * len(input_ids)
        for i, row in enumerate(input_ids):
            if not self.done[i]:
                text = self.decode(row[self.start :].tolist())
                self.done[i] = first_stop(text, self.stops, True) is not None
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)
