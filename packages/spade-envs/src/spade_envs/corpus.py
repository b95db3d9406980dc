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

This module reads and verifies; :mod:`spade_envs.corpus_files` writes (``write_corpus``) and
holds the file-level pieces both share (digests, ``checksums.sha256``, atomic writes).
:func:`record_digest`, :func:`corpus_checksum` and :func:`corpus_manifest` identify a corpus's
content independently of its storage format.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import spade_envs_corpora

from .core import DEFAULT_MAX_TURNS, EnvFactory
from .corpus_files import (
    RESERVED_FILES,
    parse_checksums,
    sha256_text,
    unsafe_file_problem,
    write_corpus,
)
from .errors import ChecksumError, CorpusError
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

REQUIRED_FIELDS: dict[str, type] = {"id": str, "skill": str, "hint": str, "sha256": str}
OPTIONAL_FIELDS: dict[str, tuple[type, Any]] = {
    "file": (str, ""),
    "class_name": (str, None),
    "origin": (str, "unknown"),
    "max_turns": (int, DEFAULT_MAX_TURNS),
    "split": (str, "train"),
    "title": (str, ""),
    "description": (str, ""),
    "difficulty": (dict, None),
}

#: JSON Schema of one manifest line, for writers in other packages and languages.
RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "SPADE EnvRecord",
    "type": "object",
    "required": list(REQUIRED_FIELDS),
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "skill": {"type": "string"},
        "hint": {"type": "string"},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "file": {"type": "string"},
        "class_name": {"type": ["string", "null"]},
        "origin": {"type": "string"},
        "max_turns": {"type": "integer", "minimum": 1},
        "split": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "difficulty": {
            "type": ["object", "null"],
            "description": "measured statistics, e.g. win_rate, win_rate_hint, regret, episodes",
        },
    },
    "additionalProperties": True,
}


@dataclass(frozen=True)
class EnvRecord:
    """One environment of a corpus (one line of ``manifest.jsonl``).

    ``sha256`` is the digest of the module source as UTF-8; ``difficulty`` holds measured
    statistics (``win_rate``, ``win_rate_hint``, ``regret``, ``episodes``…) or None; ``extra``
    keeps fields this schema does not know, so round trips are lossless.
    """

    id: str
    skill: str
    hint: str
    sha256: str
    file: str = ""
    class_name: str | None = None
    origin: str = "unknown"
    max_turns: int = DEFAULT_MAX_TURNS
    split: str = "train"
    title: str = ""
    description: str = ""
    difficulty: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> EnvRecord:
        """Build from a manifest dict, raising CorpusError naming ``where`` on a bad field."""
        if not isinstance(data, Mapping):
            raise CorpusError(f"{where}: expected a JSON object, got {type(data).__name__}")
        rid = data.get("id")
        label = f"{where} (id {rid!r})" if isinstance(rid, str) else where
        values: dict[str, Any] = {}
        for name, kind in REQUIRED_FIELDS.items():
            if name not in data or data[name] is None:
                raise CorpusError(
                    f"{label}: missing required field {name!r}; re-pack the corpus with spade-corpus"
                )
            if not isinstance(data[name], kind):
                raise CorpusError(
                    f"{label}: field {name!r} must be {kind.__name__}, got {type(data[name]).__name__}"
                )
            values[name] = data[name]
        if not values["id"]:
            raise CorpusError(f"{label}: field 'id' is empty")
        for name, (kind, _) in OPTIONAL_FIELDS.items():
            if name in data and data[name] is not None:
                value = data[name]
                if kind is dict and isinstance(value, str):  # Parquet stores dicts as JSON text
                    try:
                        value = json.loads(value)
                    except json.JSONDecodeError:
                        raise CorpusError(f"{label}: field {name!r} is not valid JSON") from None
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    raise CorpusError(
                        f"{label}: field {name!r} must be {kind.__name__}, got {type(value).__name__}"
                    )
                values[name] = value
        known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS) | {"source", "validation", "extra"}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The manifest dict (unknown fields from ``extra`` merged back in)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **self.extra}


def record_digest(record: EnvRecord) -> str:
    """SHA-256 of a record's manifest dict as canonical JSON (sorted keys, no spaces, UTF-8).

    It covers the module source through the record's ``sha256`` field.
    """
    text = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_text(text)


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


def _read_jsonl(path: Path, label: str) -> list[dict[str, Any]]:
    rows = []
    try:
        # not splitlines(): U+2028 may sit inside a JSON string
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorpusError(f"{label}: not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"{label} line {number}: invalid JSON ({exc.msg}); the file is truncated or corrupt"
            ) from None
    return rows


def _parse_checksums(path: Path) -> dict[str, str]:
    entries, problems = parse_checksums(path.read_text(encoding="utf-8"))
    if problems:
        number, message = problems[0]
        raise CorpusError(f"checksums.sha256 line {number}: {message}")
    for name in entries:
        if unsafe_file_problem(name) and name not in RESERVED_FILES:
            raise CorpusError(
                f"checksums.sha256 lists {name!r}, which is not a path inside the corpus"
            )
    return entries


def _released_row(row: Any) -> Any:
    """A manifest row in the field names of the released GPT-5.5 pools (``game_id``,
    ``file_name`` under ``games/``, no hint) mapped onto :class:`EnvRecord`'s; others as they are."""
    if not isinstance(row, dict) or "id" in row or "game_id" not in row:
        return row
    out = {k: v for k, v in row.items() if k not in ("game_id", "file_name", "code")}
    out["id"] = row["game_id"]
    name = row.get("file_name")
    if isinstance(name, str) and "file" not in row:
        out["file"] = name if "/" in name else f"games/{name}"
    out.setdefault("hint", "")
    return out


def _check_unique(rows: list[dict[str, Any]], label: str) -> list[EnvRecord]:
    records: list[EnvRecord] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, 1):
        rec = EnvRecord.from_dict(_released_row(row), f"{label} line {number}")
        if rec.id in seen:
            raise CorpusError(
                f"{label} line {number}: duplicate id {rec.id!r} (first on line {seen[rec.id]})"
            )
        seen[rec.id] = number
        records.append(rec)
    return records


def _load_directory(path: Path, verify: bool) -> Corpus:
    manifest = path / "manifest.jsonl"
    if not manifest.is_file():
        raise CorpusError(f"{path}: no manifest.jsonl; is this a SPADE corpus directory?")
    rows = _read_jsonl(manifest, "manifest.jsonl")
    released = any(isinstance(r, dict) and "id" not in r and "game_id" in r for r in rows)
    records = _check_unique(rows, "manifest.jsonl")
    checksums_file = path / "checksums.sha256"
    checksums = _parse_checksums(checksums_file) if checksums_file.is_file() else None
    if verify and checksums is None:
        raise CorpusError(
            f"{path}: no checksums.sha256; regenerate it (sha256sum format) or load with verify=False"
        )
    sources: dict[str, str] = {}
    for rec in records:
        if not rec.file:
            raise CorpusError(f"manifest.jsonl: record {rec.id!r} has no 'file' field")
        problem = unsafe_file_problem(rec.file)
        if problem:
            raise CorpusError(f"manifest.jsonl: record {rec.id!r}: {problem}")
        file = path / rec.file
        if not file.is_file():
            raise CorpusError(f"record {rec.id!r}: file {rec.file} is missing")
        data = file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if verify:
            if digest != rec.sha256:
                raise ChecksumError(
                    f"record {rec.id!r}: {rec.file} has SHA-256 {digest[:12]}…, manifest says {rec.sha256[:12]}…; "
                    "the file was modified or truncated"
                )
            if checksums is None or rec.file not in checksums:
                raise ChecksumError(
                    f"record {rec.id!r}: {rec.file} is not listed in checksums.sha256"
                )
        try:
            sources[rec.id] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusError(f"record {rec.id!r}: {rec.file} is not UTF-8 text") from None
    if verify and checksums is not None:
        for name, expected in checksums.items():
            file = path / name
            if not file.is_file():
                raise ChecksumError(f"checksums.sha256 lists {name}, which is missing")
            if hashlib.sha256(file.read_bytes()).hexdigest() != expected:
                raise ChecksumError(
                    f"{name}: SHA-256 does not match checksums.sha256; the file was modified or truncated"
                )
    validation: dict[str, dict[str, Any]] = {}
    vfile = path / "validation_manifest.jsonl"
    if vfile.is_file():
        for number, row in enumerate(_read_jsonl(vfile, "validation_manifest.jsonl"), 1):
            if isinstance(row, dict) and "id" not in row and "game_id" in row:
                row = {**row, "id": row["game_id"]}  # the released pools' field name
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise CorpusError(f"validation_manifest.jsonl line {number}: missing 'id'")
            validation[row["id"]] = row
    summary = None
    sfile = path / "validation_summary.json"
    if sfile.is_file():
        try:
            summary = json.loads(sfile.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"validation_summary.json: invalid JSON ({exc.msg})") from None
    return Corpus(
        path, tuple(records), sources, validation, summary, "compat" if released else "strict"
    )


def _load_packed(path: Path, rows: list[dict[str, Any]], verify: bool) -> Corpus:
    label = path.name
    records = _check_unique(rows, label)
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
        return _load_directory(path, verify)
    if path.suffix == ".jsonl":
        return _load_packed(path, _read_jsonl(path, path.name), verify)
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
