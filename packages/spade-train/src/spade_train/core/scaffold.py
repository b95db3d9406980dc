"""The scaffold for designers too small to follow the answer format unaided, and the check
that what they write is more than a copy of what they were shown.

A scaffolded designer prompt shows one short, complete example game of the target skill (the
starter corpus's training games of that skill, in turn), and the reply is prefilled with the
opening code fence. :func:`copies_of_references` asks spade-corpus's near-duplicate detection
which valid designs are exact or near copies of a reference game (every scaffold example and
every game of the shipped starter and example corpora), so a run reports how many of its
valid designs are new.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import spade_corpus as sc
import spade_envs as se

__all__ = [
    "SCAFFOLD_PREFILL",
    "SCAFFOLD_STOP",
    "close_reply",
    "copies_of_references",
    "fallback_example",
    "pick_example",
    "reference_sources",
    "scaffold_examples",
]

SCAFFOLD_PREFILL = "```python\n"
"""How a scaffolded designer reply starts (the policy continues from here)."""

SCAFFOLD_STOP: tuple[str, ...] = ("\n```", "\nif __name__", "\ndef main(", "\ndef test")
"""Where a scaffolded designer reply stops: the closing fence of its code block, or the start
of a script entry point or a test function after the class (a small policy goes on writing
``main()``, ``if __name__ == "__main__":`` blocks and ``def test_…():`` functions, which the
validator rejects as top-level side effects or which loop until the token budget runs out:
in 16 designs of a measured run, one complete class was lost so); :func:`close_reply` cuts
such an ending and closes the block."""

_ENTRY_POINTS = SCAFFOLD_STOP[1:]


def close_reply(text: str) -> str:
    """A scaffolded reply (after the prefill) cut where a script entry point starts, with the
    code block closed; a reply that closed its block, or ran out of tokens, is unchanged."""
    fence = text.find(SCAFFOLD_STOP[0])
    cuts = [i for i in (text.find(m) for m in _ENTRY_POINTS) if i >= 0 and (fence < 0 or i < fence)]
    if not cuts:
        return text
    return text[: min(cuts)].rstrip() + SCAFFOLD_STOP[0]


_FALLBACK = r"""import random
import re


class GuessEnv:
    skill = "__SKILL__"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.secret, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        self.secret = random.Random(seed).randint(1, 30)
        self.turn, self.done = 0, False
        return f"Guess my number from 1 to 30 in {self.max_turns} turns. Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else -1
        if guess == self.secret:
            self.done = True
            return "Correct!", 1.0, True, False, {}
        text = "Higher." if guess < self.secret else "Lower."
        self.done = self.turn >= self.max_turns
        score = max(0.0, 0.5 - abs(guess - self.secret) / 60) if self.done else 0.0
        return text, score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.secret}}}"

    def close(self):
        pass
"""

_FALLBACK_HINT = "Halve the range each turn: guess the middle of the numbers still possible."


def fallback_example(skill: str) -> tuple[str, str]:
    """The example for a skill the starter corpus lacks: a number-guessing game set to ``skill``."""
    return _FALLBACK.replace("__SKILL__", skill), _FALLBACK_HINT


@functools.lru_cache(maxsize=1)
def _starter() -> se.Corpus:
    return se.load_corpus(se.starter_corpus_path())


def scaffold_examples(skill: str) -> list[tuple[str, str]]:
    """``(source, hint)`` of the starter corpus's training games of ``skill`` (manifest order),
    or the fallback example when it has none."""
    corpus = _starter()
    found = [
        (corpus.source(r.id), r.hint)
        for r in corpus.records
        if r.skill == skill and r.split == "train"
    ]
    return found or [fallback_example(skill)]


def pick_example(skill: str, index: int) -> tuple[str, str]:
    """The example a scaffolded prompt shows: the ``index``-th of the skill's examples, cycled."""
    examples = scaffold_examples(skill)
    return examples[index % len(examples)]


@functools.lru_cache(maxsize=1)
def reference_sources() -> tuple[tuple[str, str], ...]:
    """``(id, source)`` of every game a design must not copy: the starter and example corpora
    (all splits) and the fallback example."""
    refs = [("ref:fallback", fallback_example("Math")[0])]
    for name, corpus in (("starter", _starter()), ("example", se.load_corpus("example"))):
        refs += [(f"ref:{name}/{r.id}", corpus.source(r.id)) for r in corpus.records]
    return tuple(refs)


def copies_of_references(designs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """For each ``(id, source)`` design that is an exact or near duplicate
    (``spade_corpus.find_duplicates`` at its default threshold) of a reference game, or of a
    design that is one, the id of a reference game it copies."""
    if not designs:
        return {}
    report = sc.find_duplicates([*reference_sources(), *designs])
    ids = {i for i, _ in designs}
    copied: dict[str, str] = {i: i for i, _ in reference_sources()}
    changed = True
    while changed:  # an exact copy of a near copy joins through its representative
        changed = False
        for cluster in report.clusters:
            source = next((copied[i] for i in cluster.ids if i in copied), None)
            if source is None:
                continue
            for i in cluster.ids:
                if i not in copied:
                    copied[i], changed = source, True
    return {i: ref for i, ref in copied.items() if i in ids}
