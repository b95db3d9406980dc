"""Grounding snippets for designer prompts, sampled from a pretraining-text JSONL file.

The file (``CORPUS_FILE``, one JSON object per line, the text under ``field``) can be far
larger than memory: the sampler never reads it whole. By default it seeks to a random byte
offset, skips to the next line and reads one record, so one sample costs a seek and a line read
whatever the file size; records that follow long lines are a little more likely (the chance
of a record is proportional to the length of the line before it). ``uniform=True`` streams the
file once to index line offsets and then samples records uniformly.

Every sample is seeded from ``(seed, index)``, so the snippets of prompt ``index`` are the same
on every run and can be replayed alone. Without ``CORPUS_FILE`` the shipped sample
(:func:`sample_corpus_path`) is used.
"""

from __future__ import annotations

import json
import os
import random
from array import array
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Snippet", "GroundingSampler", "GroundingError", "sample_corpus_path"]


class GroundingError(ValueError):
    """The grounding corpus is missing, empty or has no usable record."""


def sample_corpus_path() -> Path:
    """The small public-domain (CC0) grounding sample shipped with this package."""
    return Path(__file__).parent / "data" / "grounding_sample.jsonl"


@dataclass(frozen=True)
class Snippet:
    """A piece of grounding text and where it came from (byte offset of its line)."""

    text: str
    offset: int
    source: str


class GroundingSampler:
    """Seeded snippets from a JSONL text corpus (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        field: str = "text",
        min_chars: int = 80,
        max_chars: int = 800,
        seed: int = 0,
        uniform: bool = False,
        max_attempts: int = 64,
    ):
        if path is None:
            path = os.environ.get("CORPUS_FILE") or sample_corpus_path()
        self.path = Path(path)
        if not self.path.is_file():
            raise GroundingError(
                f"grounding corpus {self.path} not found; set CORPUS_FILE to a JSONL file with a {field!r} field"
            )
        self.size = self.path.stat().st_size
        if self.size == 0:
            raise GroundingError(f"grounding corpus {self.path} is empty")
        if min_chars < 1 or max_chars < min_chars:
            raise ValueError(f"need 1 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
        self.field, self.min_chars, self.max_chars = field, min_chars, max_chars
        self.seed, self.max_attempts = seed, max_attempts
        self._offsets: array | None = self._index() if uniform else None

    def _index(self) -> array:
        offsets, position = array("q"), 0
        with self.path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    offsets.append(position)
                position += len(line)
        if not offsets:
            raise GroundingError(f"grounding corpus {self.path} has no records")
        return offsets

    def _text_at(self, fh, offset: int) -> tuple[str, int] | None:
        """The usable text of the record starting at or after ``offset``, wrapping at the end."""
        if self._offsets is None:
            fh.seek(offset)
            if offset:
                fh.readline()  # finish the line we landed in
            start = fh.tell()
            line = fh.readline()
            if not line:  # past the last line: wrap to the first
                start = 0
                fh.seek(0)
                line = fh.readline()
        else:
            start = offset
            fh.seek(start)
            line = fh.readline()
        try:
            value = json.loads(line).get(self.field)
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            return None
        if not isinstance(value, str) or len(value.strip()) < self.min_chars:
            return None
        return value.strip(), start

    def _cut(self, text: str, rng: random.Random) -> str:
        if len(text) <= self.max_chars:
            return text
        start = rng.randrange(0, len(text) - self.max_chars + 1)
        if start:
            space = text.find(" ", start)
            start = space + 1 if 0 <= space < start + 40 else start
        piece = text[start : start + self.max_chars]
        end = piece.rfind(" ")
        return piece[: end if end > self.max_chars // 2 else len(piece)].strip()

    def sample(self, k: int, *, index: int = 0) -> list[Snippet]:
        """``k`` snippets for prompt ``index``; the same ``(seed, index)`` gives the same snippets."""
        rng = random.Random(f"spade-grounding:{self.seed}:{index}")
        snippets: list[Snippet] = []
        with self.path.open("rb") as fh:
            for _ in range(k):
                for _ in range(self.max_attempts):
                    if self._offsets is None:
                        offset = rng.randrange(self.size)
                    else:
                        offset = self._offsets[rng.randrange(len(self._offsets))]
                    found = self._text_at(fh, offset)
                    if found is not None:
                        snippets.append(Snippet(self._cut(found[0], rng), found[1], str(self.path)))
                        break
                else:
                    raise GroundingError(
                        f"no record with a {self.field!r} string of at least {self.min_chars} characters "
                        f"found in {self.path} after {self.max_attempts} tries; check --field and the file"
                    )
        return snippets


def add_arguments(parser) -> None:
    """``spade-corpus sample-grounding [FILE] [-k N] [--index I] [--seed S] [--field F]``."""
    parser.add_argument(
        "file", nargs="?", help="JSONL text corpus (default: $CORPUS_FILE or the shipped sample)"
    )
    parser.add_argument("-k", type=int, default=3, help="snippets to draw")
    parser.add_argument(
        "--index", type=int, default=0, help="prompt index (with --seed, fixes the draw)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--field", default="text", help="JSON field holding the text")
    parser.add_argument("--max-chars", type=int, default=800)
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of text")


def run(args) -> int:
    """Print ``-k`` snippets; a missing or unusable corpus raises GroundingError (one line)."""
    sampler = GroundingSampler(
        args.file, field=args.field, seed=args.seed, max_chars=args.max_chars
    )
    for snippet in sampler.sample(args.k, index=args.index):
        if args.json:
            print(
                json.dumps(
                    {"text": snippet.text, "offset": snippet.offset, "source": snippet.source}
                )
            )
        else:
            print(f"--- offset {snippet.offset}\n{snippet.text}")
    return 0
