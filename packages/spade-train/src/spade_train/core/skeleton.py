"""The code skeleton of a ``designer.skeleton: holes`` designer: our template writes a game's
fixed parts and the policy writes only the hole, the puzzle itself.

A 135M designer that writes whole programs mostly breaks the parts every game shares: it
returns a bare string from ``reset()``, renames the class, forgets the turn counting, or runs
out of tokens before the end. Here the reply is prefilled with the program's head (the
imports, the class line with its name and skill, ``__init__``) and the head of
``make(self, seed)`` with its seeded ``rng``, where a starter game's ``reset()`` body starts.
The policy writes the body of ``make()``: it draws one puzzle, sets ``self.answer`` and returns
the question (a ``(text, info)`` pair, as a starter game's ``reset()`` returns, is read too).
Generation stops where a new method or block would start, and :func:`assemble` appends the
template's suffix: a ``reset()`` that returns ``(observation, info)`` (and raises when
``make()`` gave no question), a ``step()`` that counts turns, reads the last ``\\boxed{...}``
and ends the episode at the first answer (1.0 only for the stored one: no second guess, so a
small answer set cannot be tried through; a reply without a box costs a turn of
``max_turns``), and ``solution()`` returning the stored answer. (With the whole template
before the hole, SmolLM2-135M ended its reply at once: 4 of 4 designs had an empty body.)

The prefix is part of the prompt (an assistant prefill, as the scaffold's opening fence), so
its tokens are context with loss mask 0; the trained tokens are exactly the hole the policy
sampled. The suffix is appended text: validated and played with the hole, never shown to the
policy and never trained. The template is written apart from the starter games' form (its
own answer reader, no "higher/lower" feedback, no partial score), so a design is a near copy of
a shipped game only when its hole copies one.
"""

from __future__ import annotations

import functools
import textwrap

import spade_corpus as sc

from spade_train.core.scaffold import reference_sources

__all__ = [
    "PUZZLE_COPY_SHARE",
    "SKELETON_STOP",
    "assemble",
    "class_name",
    "hole_of",
    "nearest_reference",
    "prefix",
    "puzzle_source",
    "shared_puzzle",
    "suffix",
]

SKELETON_STOP: tuple[str, ...] = (
    "\n    def ",
    "\n    @",
    "\nclass ",
    "\ndef ",
    "\nif __name__",
    "\n```",
)
"""Where the hole ends: the next method, a new top-level block, or the closing fence."""

_PREFIX = """import random
import re


class __NAME__:
    skill = "__SKILL__"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.question = "", ""
        self.turn, self.done = 0, True

    def make(self, seed):
        rng = random.Random(seed)"""

_SUFFIX = r"""

    def reset(self, seed=None):
        self.turn, self.done = 0, False
        made = self.make(seed)
        text = made[0] if isinstance(made, tuple) and made else made
        if not isinstance(text, str) or not text.strip():
            raise ValueError("make() must return the question text")
        self.question = text
        return f"{text} One answer only. Reply \\boxed{{ANSWER}}.", {}

    def read(self, action):
        found = re.findall(r"\\boxed\{([^{}]*)\}", str(action))
        return found[-1].strip().lower() if found else None

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        guess = self.read(action)
        if guess is not None:
            self.done = True
            if guess == str(self.answer).strip().lower():
                return "Correct!", 1.0, True, False, {}
            return "That is not it.", 0.0, True, False, {}
        self.done = self.turn >= self.max_turns
        return "Put one answer in \\boxed{}.", 0.0, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
"""


def class_name(skill: str) -> str:
    """The class the template declares for ``skill`` (letters of the skill, then ``PuzzleEnv``)."""
    letters = "".join(ch for ch in skill.title() if ch.isalnum())
    return f"{letters or 'Game'}PuzzleEnv"


def prefix(skill: str) -> str:
    """The program up to the hole (what the reply is prefilled with, after the code fence)."""
    return _PREFIX.replace("__NAME__", class_name(skill)).replace("__SKILL__", skill)


def suffix() -> str:
    """The program after the hole (appended to the policy's lines: validated and played,
    never shown to the policy and never trained)."""
    return _SUFFIX


def hole_of(generated: str) -> str:
    """The policy's lines of a reply: its text up to the first stop string, trailing blanks
    removed (a reply that ran out of tokens is kept whole). The prefix ends without its line
    break, so the hole starts with one (a prompt ending in a bare newline token, where
    SmolLM2's tokenizer merges a newline with the next line's indent, made it close the
    code block at once: 3 of 4 designs)."""
    cuts = [i for i in (generated.find(s) for s in SKELETON_STOP) if i >= 0]
    return generated[: min(cuts)].rstrip() if cuts else generated.rstrip()


def assemble(prefill: str, generated: str) -> str:
    """The complete reply of a skeleton designer: ``prefill`` (the code fence and the
    template's prefix, as the prompt ended), the policy's hole, the template's suffix and the
    closing fence."""
    return prefill + hole_of(generated) + _SUFFIX + "```"


PUZZLE_COPY_SHARE = 0.8
"""A skeleton design whose ``make()`` has this share of its shingles in one reference game
copies that game's puzzle (spade-corpus's near-duplicate threshold, as containment)."""

_HEAD = "    def make(self, seed):\n        rng = random.Random(seed)"


def puzzle_source(source: str) -> str | None:
    """The ``make()`` method of an assembled skeleton program, dedented (None for a program
    not made from the skeleton)."""
    head, found, rest = source.partition(_HEAD)
    if not found or "\n    def reset(self, seed=None):" not in rest:
        return None
    body = rest.split("\n    def reset(self, seed=None):", 1)[0]
    return textwrap.dedent(_HEAD + body)


def _shingles(source: str) -> frozenset[tuple[str, ...]]:
    tokens = sc.structure_tokens(source)
    return frozenset(tuple(tokens[i : i + 5]) for i in range(max(1, len(tokens) - 4)))


@functools.lru_cache(maxsize=1)
def _reference_shingles() -> tuple[tuple[str, frozenset[tuple[str, ...]]], ...]:
    return tuple((ref, _shingles(src)) for ref, src in reference_sources())


def nearest_reference(source: str) -> tuple[str, float]:
    """The reference game structurally closest to a whole program and their exact 5-token
    shingle Jaccard (the near-duplicate check's tokens, compared exactly, not estimated)."""
    mine = _shingles(source)
    scored = [(ref, len(mine & s) / len(mine | s)) for ref, s in _reference_shingles()]
    return max(scored, key=lambda x: x[1])


def shared_puzzle(source: str) -> tuple[str, float]:
    """For an assembled skeleton program: the reference game (scaffold examples, starter and
    example corpora) holding the largest share of its ``make()`` method's 5-token shingles
    (identifier- and literal-blind, as spade-corpus's near-duplicate detection), and that
    share; ``("", 0.0)`` for another program. The template's parts, shared by every design
    and written apart from the starter games, lift a whole-program Jaccard away from the
    game a hole copies: a hole that repeats a starter game's ``reset()`` body scores over
    0.9 here and under 0.5 as a whole program."""
    puzzle = puzzle_source(source)
    mine = _shingles(puzzle) if puzzle else frozenset()
    if not mine:
        return "", 0.0
    scored = [(ref, len(mine & theirs) / len(mine)) for ref, theirs in _reference_shingles()]
    return max(scored, key=lambda x: x[1])
