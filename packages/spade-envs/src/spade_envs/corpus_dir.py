"""The one reader of a corpus directory (the released layout, documented in
:mod:`spade_envs.corpus`): ``manifest.jsonl``, the game files, ``checksums.sha256`` and the
optional validation files, every SHA-256 verified. :func:`spade_envs.load_corpus` and the
Gymnasium registration read directories only through this module."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus_files import RESERVED_FILES, parse_checksums, unsafe_file_problem
from .errors import ChecksumError, CorpusError
from .records import EnvRecord

__all__ = [
    "CorpusDirectory",
    "read_directory",
    "manifest_ids",
    "read_jsonl",
    "check_unique",
    "read_checksums",
]


@dataclass(frozen=True)
class CorpusDirectory:
    """What :func:`read_directory` read: records in manifest order, sources by id, validation
    rows by id, the validation summary, and whether the manifest uses the released pools' field
    names (``game_id``, ``file_name``)."""

    records: tuple[EnvRecord, ...]
    sources: dict[str, str]
    validation: dict[str, dict[str, Any]]
    summary: Any
    released: bool


def _manifest(path: Path) -> Path:
    manifest = path / "manifest.jsonl"
    if not manifest.is_file():
        raise CorpusError(f"{path}: no manifest.jsonl; is this a SPADE corpus directory?")
    return manifest


def is_corpus_directory(path: Path) -> bool:
    """Whether ``path`` is a directory holding a ``manifest.jsonl``."""
    return (path / "manifest.jsonl").is_file()


def manifest_ids(path: Path) -> list[str]:
    """The record ids of the corpus directory at ``path`` in manifest order, without reading
    or verifying the game files (what registration needs; loading verifies later)."""
    rows = read_jsonl(_manifest(path), "manifest.jsonl")
    return [record.id for record in check_unique(rows, "manifest.jsonl")]


def read_jsonl(path: Path, label: str) -> list[dict[str, Any]]:
    """The JSON rows of a ``.jsonl`` file (blank lines skipped); a one-line CorpusError names
    ``label`` and the line of the first bad row."""
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


def read_checksums(path: Path) -> dict[str, str]:
    """``{relative path: digest}`` of a ``checksums.sha256`` file; one-line CorpusError on a bad line."""
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


def check_unique(rows: list[dict[str, Any]], label: str) -> list[EnvRecord]:
    """Manifest rows as records (the released pools' field names mapped), ids unique."""
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


def read_directory(path: Path, verify: bool = True) -> CorpusDirectory:
    """Read the corpus directory at ``path``, verifying every SHA-256 when ``verify``; raises a
    one-line :class:`CorpusError` (or :class:`ChecksumError`) naming the file, line or record."""
    rows = read_jsonl(_manifest(path), "manifest.jsonl")
    released = any(isinstance(r, dict) and "id" not in r and "game_id" in r for r in rows)
    records = check_unique(rows, "manifest.jsonl")
    checksums_file = path / "checksums.sha256"
    checksums = read_checksums(checksums_file) if checksums_file.is_file() else None
    if verify and checksums is None:
        raise CorpusError(
            f"{path}: no checksums.sha256; regenerate it (sha256sum format) or load with verify=False"
        )
    sources = {rec.id: _record_source(path, rec, verify, checksums) for rec in records}
    if verify and checksums is not None:
        _verify_listed(path, checksums)
    validation = _validation_rows(path / "validation_manifest.jsonl")
    summary = _summary(path / "validation_summary.json")
    return CorpusDirectory(tuple(records), sources, validation, summary, released)


def _record_source(
    path: Path, rec: EnvRecord, verify: bool, checksums: dict[str, str] | None
) -> str:
    """One record's source text, its file checked (safe name, present, SHA-256, UTF-8)."""
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
            raise ChecksumError(f"record {rec.id!r}: {rec.file} is not listed in checksums.sha256")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorpusError(f"record {rec.id!r}: {rec.file} is not UTF-8 text") from None


def _verify_listed(path: Path, checksums: dict[str, str]) -> None:
    """Every file checksums.sha256 lists is present with its SHA-256."""
    for name, expected in checksums.items():
        file = path / name
        if not file.is_file():
            raise ChecksumError(f"checksums.sha256 lists {name}, which is missing")
        if hashlib.sha256(file.read_bytes()).hexdigest() != expected:
            raise ChecksumError(
                f"{name}: SHA-256 does not match checksums.sha256; the file was modified or truncated"
            )


def _validation_rows(vfile: Path) -> dict[str, dict[str, Any]]:
    """validation_manifest.jsonl by id (the released pools' ``game_id`` read as ``id``)."""
    validation: dict[str, dict[str, Any]] = {}
    if not vfile.is_file():
        return validation
    for number, row in enumerate(read_jsonl(vfile, "validation_manifest.jsonl"), 1):
        if isinstance(row, dict) and "id" not in row and "game_id" in row:
            row = {**row, "id": row["game_id"]}
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise CorpusError(f"validation_manifest.jsonl line {number}: missing 'id'")
        validation[row["id"]] = row
    return validation


def _summary(sfile: Path) -> Any:
    """validation_summary.json, or None when there is none."""
    if not sfile.is_file():
        return None
    try:
        return json.loads(sfile.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CorpusError(f"validation_summary.json: invalid JSON ({exc.msg})") from None
