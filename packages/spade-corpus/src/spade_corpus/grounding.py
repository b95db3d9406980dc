"""Grounding for designer prompts, sampled from a pretraining-text JSONL file: one document cut
at a word budget (:meth:`GroundingSampler.document`, the released code's reading of its SPICE
corpus) or short snippets (:meth:`GroundingSampler.sample`, for small-context policies).

The file (``CORPUS_FILE``, one JSON object per line) holds each record's text under one of
``field`` (default :data:`DEFAULT_FIELDS`: ``orig_doc``, else ``text``); lines that are not
JSON objects with such a string are junk and skipped. The file can be far larger than memory:
the sampler never reads it whole to draw. By default it seeks to a random byte
offset, skips to the next line and reads one record, so one sample costs a seek and a line read
whatever the file size; records that follow long lines are a little more likely (the chance
of a record is proportional to the length of the line before it). ``uniform=True`` streams the
file once to index line offsets and then samples records uniformly. When draws keep landing
on junk lines, one pass indexes the usable records and the draw is uniform among them.

Every sample is seeded from ``(seed, index)``, so the snippets of prompt ``index`` are the same
on every run and can be replayed alone. Without ``CORPUS_FILE`` the shipped sample
(:func:`sample_corpus_path`) is used.
"""

from __future__ import annotations

import json
import os
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_FIELDS",
    "Snippet",
    "GroundingSampler",
    "GroundingError",
    "sample_corpus_path",
    "truncate_words",
]

DEFAULT_FIELDS: tuple[str, ...] = ("orig_doc", "text")
"""Where a record's text is read, first non-blank string wins: SPICE records (the paper's
corpus) hold it under ``orig_doc``, generic corpora under ``text`` (as the released code)."""


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
    """Seeded snippets or documents from a JSONL text corpus (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        field: str | Sequence[str] | None = None,
        min_chars: int = 80,
        max_chars: int = 800,
        seed: int = 0,
        uniform: bool = False,
        max_attempts: int = 64,
    ):
        self.fields = _fields(field)
        if path is None:
            path = os.environ.get("CORPUS_FILE") or sample_corpus_path()
        self.path = Path(path)
        if not self.path.is_file():
            raise GroundingError(
                f"grounding corpus {self.path} not found; set CORPUS_FILE to a JSONL file whose "
                f"records hold text under {_names(self.fields)}"
            )
        self.size = self.path.stat().st_size
        if self.size == 0:
            raise GroundingError(f"grounding corpus {self.path} is empty")
        if min_chars < 1 or max_chars < min_chars:
            raise ValueError(f"need 1 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
        self.field = self.fields[0]
        self.min_chars, self.max_chars = min_chars, max_chars
        self.seed, self.max_attempts = seed, max_attempts
        self._offsets: array | None = self._index() if uniform else None
        self._usable: dict[int, array] = {}  # min_chars -> offsets of usable records

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

    def _value(self, line: bytes, min_chars: int) -> str | None:
        """The record's text: its first field holding a non-blank string (``orig_doc`` before
        ``text`` by default), or None for a junk line or a too-short text."""
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        if not isinstance(record, dict):
            return None
        for name in self.fields:
            value = record.get(name)
            if isinstance(value, str) and value.strip():
                value = value.strip()
                return value if len(value) >= min_chars else None
        return None

    def _text_at(self, fh, offset: int, min_chars: int) -> tuple[str, int] | None:
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
        value = self._value(line, min_chars)
        return None if value is None else (value, start)

    def _usable_offsets(self, min_chars: int) -> array:
        """Offsets of every usable record (one pass over the file, kept): the fallback when
        random draws keep landing on junk lines."""
        if min_chars not in self._usable:
            offsets, position = array("q"), 0
            with self.path.open("rb") as fh:
                for line in fh:
                    if self._value(line, min_chars) is not None:
                        offsets.append(position)
                    position += len(line)
            if not offsets:
                raise GroundingError(
                    f"no record with text under {_names(self.fields)} of at least {min_chars} "
                    f"characters in {self.path}; check the field and the file"
                )
            self._usable[min_chars] = offsets
        return self._usable[min_chars]

    def _draw(self, fh, rng: random.Random, min_chars: int) -> tuple[str, int]:
        """One usable record: random draws first; after ``max_attempts`` junk lines, a
        uniform draw among the usable records (so junk lines never hide a usable one)."""
        for _ in range(self.max_attempts):
            if self._offsets is None:
                offset = rng.randrange(self.size)
            else:
                offset = self._offsets[rng.randrange(len(self._offsets))]
            found = self._text_at(fh, offset, min_chars)
            if found is not None:
                return found
        usable = self._usable_offsets(min_chars)
        start = usable[rng.randrange(len(usable))]
        fh.seek(start)
        value = self._value(fh.readline(), min_chars)
        assert value is not None  # indexed as usable
        return value, start

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
                text, offset = self._draw(fh, rng, self.min_chars)
                snippets.append(Snippet(self._cut(text, rng), offset, str(self.path)))
        return snippets

    def document(self, *, index: int = 0, max_words: int = 6000) -> Snippet:
        """One whole record for prompt ``index`` (any non-blank text), cut by
        :func:`truncate_words` (the released code's reading of a SPICE corpus)."""
        rng = random.Random(f"spade-grounding-doc:{self.seed}:{index}")
        with self.path.open("rb") as fh:
            text, offset = self._draw(fh, rng, 1)
        return Snippet(truncate_words(text, max_words), offset, str(self.path))


def truncate_words(text: str, max_words: int) -> str:
    """``text`` if it has at most ``max_words`` whitespace-separated words; else its first
    ``max_words`` words joined by single spaces and a line saying where it was cut."""
    words = text.split()
    if len(words) <= max_words:
        return text
    return (
        " ".join(words[:max_words]) + f"\n[... the document is cut here, after {max_words} words]"
    )


def _fields(field: str | Sequence[str] | None) -> tuple[str, ...]:
    if field is None:
        return DEFAULT_FIELDS
    fields = (field,) if isinstance(field, str) else tuple(field)
    if not fields or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"field must name at least one JSON field, got {field!r}")
    return fields


def _names(fields: Sequence[str]) -> str:
    return " or ".join(repr(f) for f in fields)


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
    parser.add_argument(
        "--field", default=None, help="JSON field holding the text (default: orig_doc, else text)"
    )
    parser.add_argument("--max-chars", type=int, default=800)
    parser.add_argument(
        "--document",
        type=int,
        metavar="WORDS",
        help="print one whole document per index, cut at WORDS words, instead of snippets",
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of text")


def run(args) -> int:
    """Print ``-k`` snippets (or documents); a missing or unusable corpus raises
    GroundingError (one line)."""
    sampler = GroundingSampler(
        args.file, field=args.field, seed=args.seed, max_chars=args.max_chars
    )
    if args.document:
        drawn = [
            sampler.document(index=args.index + i, max_words=args.document) for i in range(args.k)
        ]
    else:
        drawn = sampler.sample(args.k, index=args.index)
    for snippet in drawn:
        if args.json:
            print(
                json.dumps(
                    {"text": snippet.text, "offset": snippet.offset, "source": snippet.source}
                )
            )
        else:
            print(f"--- offset {snippet.offset}\n{snippet.text}")
    return 0
