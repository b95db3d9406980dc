"""What each shipped recipe is for, read from the comment block that opens its YAML file.

Every recipe starts with a comment whose first sentence says what the run is; a recipe that
reproduces a released launcher names it there (``upstream cmd/games/train_spade_4b.sh``). ``spade recipes`` prints the first sentence, and the
documentation's recipe page lists both. Reading the comment needs no YAML parser and no
import of the config models, so ``spade recipes`` stays instant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["RecipeNote", "recipe_note", "recipe_notes"]

_SENTENCE_END = re.compile(r"(?<![A-Z]\.[a-z])(?<!e\.g)(?<!i\.e)\.(\s|$)")
_UPSTREAM = re.compile(r"upstream\s+(cmd/[\w{},/*.-]+?\.sh)")


@dataclass(frozen=True)
class RecipeNote:
    """One recipe: its name, the first sentence of its opening comment (``purpose``) and the
    released launcher it reproduces (``upstream``; empty for this project's own runs)."""

    name: str
    purpose: str
    upstream: str
    comment: str


def _recipes_dir() -> Path:
    return Path(str(resources.files("spade_train") / "recipes"))


def _comment(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(x for x in lines if x)


def recipe_note(path: Path) -> RecipeNote:
    """The note of the recipe file ``path``; a recipe without an opening comment gets an
    empty purpose (the test over the shipped recipes refuses that)."""
    comment = _comment(path.read_text(encoding="utf-8"))
    end = _SENTENCE_END.search(comment)
    purpose = comment[: end.start() + 1] if end else comment
    found = _UPSTREAM.search(comment)
    return RecipeNote(path.stem, purpose, found.group(1) if found else "", comment)


def recipe_notes(include_bases: bool = False) -> list[RecipeNote]:
    """Notes of the shipped recipes, sorted by name (bases, ``_name.yaml``, only on request)."""
    paths = sorted(_recipes_dir().glob("*.yaml"), key=lambda p: p.stem)
    return [recipe_note(p) for p in paths if include_bases or not p.stem.startswith("_")]
