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
back, so reading and writing is lossless.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core import DEFAULT_MAX_TURNS, EnvFactory
from .errors import ChecksumError, CorpusError
from .source import load_env

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


def sha256_text(text: str) -> str:
    """SHA-256 of ``text`` encoded as UTF-8 (how corpus files are hashed)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
                raise CorpusError(f"{label}: missing required field {name!r}; re-pack the corpus with spade-corpus")
            if not isinstance(data[name], kind):
                raise CorpusError(f"{label}: field {name!r} must be {kind.__name__}, got {type(data[name]).__name__}")
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
                    raise CorpusError(f"{label}: field {name!r} must be {kind.__name__}, got {type(value).__name__}")
                values[name] = value
        known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS) | {"source", "validation", "extra"}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The manifest dict (unknown fields from ``extra`` merged back in)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **self.extra}


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
        raise CorpusError(f"no environment {env_id!r} in {self.path}; `spade-envs list {self.path}` shows the ids")

    def source(self, env_id: str) -> str:
        return self.sources[self.record(env_id).id]

    def counts_by_skill(self) -> dict[str, int]:
        return dict(sorted(Counter(r.skill for r in self.records).items()))

    def split(self, name: str) -> list[EnvRecord]:
        return [r for r in self.records if r.split == name]

    def factory(self, env_id: str, *, sandbox: bool = False, sandbox_config: Any = None, sandbox_pool: Any = None, mode: str | None = None) -> EnvFactory:
        """A factory for one environment (in-process, or in spade-sandbox with ``sandbox=True``),
        run in ``mode`` (default: the corpus's own :attr:`mode`)."""
        rec = self.record(env_id)
        return load_env(
            self.sources[rec.id], rec.class_name, sandbox=sandbox, sandbox_config=sandbox_config,
            sandbox_pool=sandbox_pool, origin=f"{self.path}:{rec.file or rec.id}", mode=mode or self.mode,
        )

    def make(self, env_id: str, *, hint: bool = False, max_turns: int | None = None, sandbox: bool = False, **kwargs: Any):
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
    """The small example corpus shipped inside this package."""
    return Path(__file__).parent / "corpora" / "example"


def tool_use_corpus_path() -> Path:
    """The tool-use corpus shipped inside this package (records carry ``tools`` and ``domain``)."""
    return Path(__file__).parent / "corpora" / "tool_use"


def resolve_corpus_path(name_or_path: str | os.PathLike[str]) -> Path:
    """``"example"`` names the shipped corpus; anything else is a path that must exist."""
    if str(name_or_path) == "example" and not Path("example").exists():
        return example_corpus_path()
    if str(name_or_path) == "tool_use" and not Path("tool_use").exists():
        return tool_use_corpus_path()
    path = Path(name_or_path)
    if not path.exists():
        raise CorpusError(f"corpus {str(name_or_path)!r} not found; pass a corpus directory, a .jsonl/.parquet file, or 'example'")
    return path


def _read_jsonl(path: Path, label: str) -> list[dict[str, Any]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines(): U+2028 may sit inside a JSON string
    except UnicodeDecodeError:
        raise CorpusError(f"{label}: not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{label} line {number}: invalid JSON ({exc.msg}); the file is truncated or corrupt") from None
    return rows


def _parse_checksums(path: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition(" ")
        name = name[1:] if name[:1] in (" ", "*") else name
        if not sep or len(digest) != 64 or not name:
            raise CorpusError(f"checksums.sha256 line {number}: expected '<sha256>  <path>', got {line[:60]!r}")
        entries[name] = digest.lower()
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
    records, seen = [], {}
    for number, row in enumerate(rows, 1):
        rec = EnvRecord.from_dict(_released_row(row), f"{label} line {number}")
        if rec.id in seen:
            raise CorpusError(f"{label} line {number}: duplicate id {rec.id!r} (first on line {seen[rec.id]})")
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
        raise CorpusError(f"{path}: no checksums.sha256; regenerate it (sha256sum format) or load with verify=False")
    sources: dict[str, str] = {}
    for rec in records:
        if not rec.file:
            raise CorpusError(f"manifest.jsonl: record {rec.id!r} has no 'file' field")
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
            if rec.file not in checksums:
                raise ChecksumError(f"record {rec.id!r}: {rec.file} is not listed in checksums.sha256")
        try:
            sources[rec.id] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusError(f"record {rec.id!r}: {rec.file} is not UTF-8 text") from None
    if verify:
        for name, expected in checksums.items():
            file = path / name
            if not file.is_file():
                raise ChecksumError(f"checksums.sha256 lists {name}, which is missing")
            if hashlib.sha256(file.read_bytes()).hexdigest() != expected:
                raise ChecksumError(f"{name}: SHA-256 does not match checksums.sha256; the file was modified or truncated")
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
    return Corpus(path, tuple(records), sources, validation, summary, "compat" if released else "strict")


def _load_packed(path: Path, rows: list[dict[str, Any]], verify: bool) -> Corpus:
    label = path.name
    records = _check_unique(rows, label)
    sources, validation = {}, {}
    for number, (rec, row) in enumerate(zip(records, rows, strict=True), 1):
        source = row.get("source")
        if not isinstance(source, str):
            raise CorpusError(f"{label} line {number} (id {rec.id!r}): missing required field 'source'")
        if verify and sha256_text(source) != rec.sha256:
            raise ChecksumError(f"record {rec.id!r}: source SHA-256 does not match its 'sha256' field; the record was modified or truncated")
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
            raise CorpusError("reading Parquet needs pyarrow: pip install 'spade-envs[parquet]'") from None
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:
            raise CorpusError(f"{path.name}: not a readable Parquet file ({exc})") from None
        return _load_packed(path, rows, verify)
    raise CorpusError(f"{path}: not a corpus; pass a directory, a .jsonl or a .parquet file")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_corpus(
    path: str | os.PathLike[str],
    records: Iterable[EnvRecord],
    sources: Mapping[str, str],
    *,
    validation: Mapping[str, dict[str, Any]] | None = None,
    summary: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a corpus directory in the released layout, atomically (built aside, then renamed).

    Each record's ``file`` defaults to ``games/game_NNN.py`` and its ``sha256`` is recomputed
    from the source. ``checksums.sha256`` covers every other file written.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise CorpusError(f"{target} already exists; pass overwrite=True or choose another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        lines, files = [], []
        for index, rec in enumerate(records, 1):
            source = sources[rec.id]
            file = rec.file or f"games/game_{index:03d}.py"
            rec = dataclasses.replace(rec, file=file, sha256=sha256_text(source))
            _write_text(staging / file, source)
            files.append(file)
            lines.append(json.dumps(rec.to_dict(), ensure_ascii=False))
        _write_text(staging / "manifest.jsonl", "\n".join(lines) + "\n")
        files.append("manifest.jsonl")
        if validation is not None:
            rows = [json.dumps(v, ensure_ascii=False) for v in validation.values()]
            _write_text(staging / "validation_manifest.jsonl", "\n".join(rows) + ("\n" if rows else ""))
            files.append("validation_manifest.jsonl")
        if summary is not None:
            _write_text(staging / "validation_summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
            files.append("validation_summary.json")
        sums = [f"{hashlib.sha256((staging / f).read_bytes()).hexdigest()}  {f}" for f in sorted(files)]
        _write_text(staging / "checksums.sha256", "\n".join(sums) + "\n")
        if target.exists():
            backup = target.with_name(f".{target.name}.old")
            shutil.rmtree(backup, ignore_errors=True)
            target.rename(backup)
            staging.rename(target)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
