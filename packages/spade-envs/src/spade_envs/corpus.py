"""Reading (and writing) a SPADE corpus, verifying every SHA-256 on load.

Corpus format
-------------
A corpus directory, the layout of the released SPADE corpus::

    games/game_*.py            one environment module per record
    manifest.jsonl             one EnvRecord per line (schema below)
    validation_manifest.jsonl  optional: one validation result per record, {"id": ..., ...}
    validation_summary.json    optional: totals of the validation run
    checksums.sha256           "<sha256>  <relative path>" per file (``sha256sum -c`` format)

or the same records packed one per line into a ``.jsonl`` file (or a ``.parquet`` table with
the same columns), each line the record's fields plus ``source`` (the module text) and
optionally ``validation``. Dict-valued fields may be stored as JSON strings in Parquet.

Loading checks, and names the record or line in a one-line :class:`CorpusError` otherwise:
valid JSON on every manifest line, the required fields with the right types, unique ids, every
record's file present with the SHA-256 its record states, and every file listed in
``checksums.sha256`` matching. Unknown record fields are kept in ``EnvRecord.extra`` and written
back, so reading and writing is lossless. Every record's ``file`` must be a relative path inside
the corpus (:func:`~spade_envs.corpus_files.unsafe_file_problem`).

This module loads any format; :mod:`spade_envs.corpus_dir` is the one reader of a directory,
:mod:`spade_envs.corpus_files` writes one (``write_corpus``) and holds the file-level pieces
both share (digests, ``checksums.sha256``, atomic writes), :mod:`spade_envs.records` holds
:class:`EnvRecord`.
:func:`record_digest`, :func:`corpus_checksum` and :func:`corpus_manifest` identify a corpus's
content independently of its storage format.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import spade_envs_corpora

from .core import EnvFactory
from .corpus_dir import check_unique, read_directory, read_jsonl
from .corpus_files import sha256_text, write_corpus
from .errors import ChecksumError, CorpusError
from .records import RECORD_SCHEMA, EnvRecord, record_digest
from .source import load_env

if TYPE_CHECKING:
    from .gym_env import SpadeGymEnv

__all__ = [
    "EnvRecord",
    "Corpus",
    "load_corpus",
    "write_corpus",
    "resolve_corpus_path",
    "example_corpus_path",
    "tool_use_corpus_path",
    "sha256_text",
    "RECORD_SCHEMA",
    "record_digest",
    "corpus_checksum",
    "corpus_manifest",
]


def corpus_checksum(records: Iterable[EnvRecord]) -> str:
    """SHA-256 over the lines ``"<record digest>  <id>\\n"`` sorted.

    It depends on records and sources only, not on manifest order or storage format, so a
    corpus has one checksum as a directory, a ``.jsonl`` and a ``.parquet``. Validation results
    are not covered: they describe a run, not the environments.
    """
    lines = sorted(f"{record_digest(r)}  {r.id}\n" for r in records)
    return sha256_text("".join(lines))


def corpus_manifest(corpus: Corpus, revision: str | None = None) -> dict[str, Any]:
    """The manifest summary of a loaded corpus: totals, counts and :func:`corpus_checksum`.

    ``revision`` is the given string, or else the first 16 hex digits of the corpus checksum
    (a content hash: two corpora with the same records and sources share it).
    """
    checksum = corpus_checksum(corpus.records)
    return {
        "revision": revision if revision is not None else checksum[:16],
        "total": len(corpus),
        "counts_by_skill": corpus.counts_by_skill(),
        "counts_by_split": dict(sorted(Counter(r.split for r in corpus.records).items())),
        "corpus_sha256": checksum,
        "algorithm": "sha256 of sorted '<sha256(canonical record JSON)>  <id>' lines",
    }


@dataclass(frozen=True)
class Corpus:
    """A verified corpus: records, their sources and validation results, in manifest order."""

    path: Path
    records: tuple[EnvRecord, ...]
    sources: Mapping[str, str]
    validation: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    mode: str = "strict"
    """How :meth:`factory` runs the sources: ``compat`` for a released corpus (its manifest
    uses the released field names), ``strict`` otherwise; see :mod:`spade_envs.compat`."""

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[EnvRecord]:
        return iter(self.records)

    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    def record(self, env_id: str) -> EnvRecord:
        for rec in self.records:
            if rec.id == env_id:
                return rec
        raise CorpusError(
            f"no environment {env_id!r} in {self.path}; `spade-envs list {self.path}` shows the ids"
        )

    def source(self, env_id: str) -> str:
        return self.sources[self.record(env_id).id]

    def counts_by_skill(self) -> dict[str, int]:
        return dict(sorted(Counter(r.skill for r in self.records).items()))

    def split(self, name: str) -> list[EnvRecord]:
        return [r for r in self.records if r.split == name]

    def factory(
        self,
        env_id: str,
        *,
        sandbox: bool = False,
        sandbox_config: Any = None,
        sandbox_pool: Any = None,
        mode: str | None = None,
    ) -> EnvFactory:
        """A factory for one environment (in-process, or in spade-sandbox with ``sandbox=True``),
        run in ``mode`` (default: the corpus's own :attr:`mode`)."""
        rec = self.record(env_id)
        return load_env(
            self.sources[rec.id],
            rec.class_name,
            sandbox=sandbox,
            sandbox_config=sandbox_config,
            sandbox_pool=sandbox_pool,
            origin=f"{self.path}:{rec.file or rec.id}",
            mode=mode or self.mode,
        )

    def make(
        self,
        env_id: str,
        *,
        hint: bool = False,
        max_turns: int | None = None,
        sandbox: bool = False,
        **kwargs: Any,
    ) -> SpadeGymEnv:
        """A :class:`~spade_envs.gym_env.SpadeGymEnv` for one environment."""
        from .gym_env import SpadeGymEnv

        rec = self.record(env_id)
        return SpadeGymEnv(
            self.factory(env_id, sandbox=sandbox),
            max_turns=max_turns or rec.max_turns,
            hint=rec.hint if hint else None,
            env_id=rec.id,
            **kwargs,
        )


def example_corpus_path() -> Path:
    """The small example corpus shipped with this package (in ``spade-envs-corpora``)."""
    return spade_envs_corpora.path("example")


def starter_corpus_path() -> Path:
    """The starter corpus shipped with this package: 18 short, easy games (three per skill,
    a third of them held out) that give partial credit, so a small policy's returns are not
    all zero."""
    return spade_envs_corpora.path("starter")


def tool_use_corpus_path() -> Path:
    """The tool-use corpus shipped with this package (records carry ``tools`` and ``domain``)."""
    return spade_envs_corpora.path("tool_use")


def resolve_corpus_path(name_or_path: str | os.PathLike[str]) -> Path:
    """``"example"`` names the shipped corpus; anything else is a path that must exist."""
    if str(name_or_path) == "example" and not Path("example").exists():
        return example_corpus_path()
    if str(name_or_path) == "tool_use" and not Path("tool_use").exists():
        return tool_use_corpus_path()
    if str(name_or_path) == "starter" and not Path("starter").exists():
        return starter_corpus_path()
    path = Path(name_or_path)
    if not path.exists():
        raise CorpusError(
            f"corpus {str(name_or_path)!r} not found; pass a corpus directory, a .jsonl/.parquet file, 'example', 'starter' or 'tool_use'"
        )
    return path


def _load_packed(path: Path, rows: list[dict[str, Any]], verify: bool) -> Corpus:
    label = path.name
    records = check_unique(rows, label)
    sources: dict[str, str] = {}
    validation: dict[str, dict[str, Any]] = {}
    for number, (rec, row) in enumerate(zip(records, rows, strict=True), 1):
        source = row.get("source")
        if not isinstance(source, str):
            raise CorpusError(
                f"{label} line {number} (id {rec.id!r}): missing required field 'source'"
            )
        if verify and sha256_text(source) != rec.sha256:
            raise ChecksumError(
                f"record {rec.id!r}: source SHA-256 does not match its 'sha256' field; the record was modified or truncated"
            )
        sources[rec.id] = source
        if row.get("validation") is not None:
            v = row["validation"]
            validation[rec.id] = json.loads(v) if isinstance(v, str) else v
    return Corpus(path, tuple(records), sources, validation)


def load_corpus(path: str | os.PathLike[str], *, verify: bool = True) -> Corpus:
    """Load a corpus directory, ``.jsonl`` or ``.parquet`` file (or ``"example"``), verifying it."""
    path = resolve_corpus_path(path)
    if path.is_dir():
        read = read_directory(path, verify)
        mode = "compat" if read.released else "strict"
        return Corpus(path, read.records, read.sources, read.validation, read.summary, mode)
    if path.suffix == ".jsonl":
        return _load_packed(path, read_jsonl(path, path.name), verify)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise CorpusError(
                "reading Parquet needs pyarrow: pip install 'spade-envs[parquet]'"
            ) from None
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:
            raise CorpusError(f"{path.name}: not a readable Parquet file ({exc})") from None
        return _load_packed(path, rows, verify)
    raise CorpusError(f"{path}: not a corpus; pass a directory, a .jsonl or a .parquet file")
