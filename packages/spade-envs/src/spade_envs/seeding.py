"""Validation seeds a designer cannot learn.

A validator that always plays seeds 0 to 4 can be gamed by a game that is honest on those
seeds and free on the rest. The seeds are drawn from a *root* at validation time instead
(:func:`fresh_root`; a training run derives its root from its own seed and the cycle, so the
run stays reproducible) and recorded in the report; the same root gives the same seeds, so a
verdict can be reproduced (``spade-corpus validate --seed-root N``).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence

__all__ = ["SEED_SPACE", "draw_seeds", "fresh_root", "more_seeds"]

#: Seeds are drawn from ``range(SEED_SPACE)`` (31 bits: any ``random.Random`` accepts them).
SEED_SPACE = 2**31


def fresh_root() -> int:
    """A new root from the operating system's randomness."""
    return secrets.randbelow(SEED_SPACE)


def draw_seeds(root: int, n: int) -> tuple[int, ...]:
    """``n`` distinct seeds drawn from ``root`` (the same root, the same seeds)."""
    if n < 1:
        raise ValueError(f"draw_seeds needs n >= 1, got {n}")
    return tuple(random.Random(f"spade-validation-{root}").sample(range(SEED_SPACE), n))


def more_seeds(played: Sequence[int], n: int) -> list[int]:
    """``n`` further seeds, drawn from the seeds already played and distinct from them (the
    checker's borderline extension: reproducible from the report's seeds alone)."""
    rng = random.Random(f"spade-more-{list(played)}")
    seen, out = set(played), list[int]()
    while len(out) < n:
        seed = rng.randrange(SEED_SPACE)
        if seed not in seen:
            seen.add(seed)
            out.append(seed)
    return out
