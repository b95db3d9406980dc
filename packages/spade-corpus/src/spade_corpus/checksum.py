"""``verify``, which names every bad record, over the corpus format that spade-envs defines.

The digests and the manifest summary are spade-envs' (``spade_envs.sha256_file``,
``record_digest``, ``corpus_checksum``, ``corpus_manifest``; see ``spade_envs.corpus_files``),
re-exported here under their old names. ``verify`` differs from ``spade_envs.load_corpus``
(which stops at the first error): it reads every manifest line, every game file and every
``checksums.sha256`` entry and reports each problem, hashing every file once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import spade_envs as se

from .pack import PACK_FORMAT, meta_path

__all__ = [
    "CHUNK_BYTES",
    "sha256_file",
    "record_digest",
    "corpus_checksum",
    "corpus_manifest",
    "Problem",
    "VerifyReport",
    "verify",
]

CHUNK_BYTES = se.CHUNK_BYTES
sha256_file = se.sha256_file
record_digest = se.record_digest
corpus_checksum = se.corpus_checksum
corpus_manifest = se.corpus_manifest


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a corpus: where (file and line), which record if known, and what."""

    where: str
    message: str
    record_id: str | None = None

    def __str__(self) -> str:
        label = f"record {self.record_id!r}: " if self.record_id else ""
        return f"{self.where}: {label}{self.message}"


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` checked and every problem it found (empty when the corpus is clean)."""

    path: Path
    records: int
    files: int
    bytes_hashed: int
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def bad_records(self) -> list[str]:
        """Ids of the records with at least one problem, in the order found."""
        return list(dict.fromkeys(p.record_id for p in self.problems if p.record_id))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "ok": self.ok,
            "records": self.records,
            "files": self.files,
            "bytes_hashed": self.bytes_hashed,
            "bad_records": self.bad_records(),
            "problems": [
                {"where": p.where, "record_id": p.record_id, "message": p.message}
                for p in self.problems
            ],
        }


class _Checker:
    """Collects problems while walking one corpus."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[Problem] = []
        self.records = 0
        self.files = 0
        self.bytes_hashed = 0
        self._digests: dict[str, str | None] = {}

    def problem(self, where: str, message: str, record_id: str | None = None) -> None:
        self.problems.append(Problem(where, message, record_id))

    def file_digest(self, name: str) -> str | None:
        """Digest of ``name`` under the corpus directory, hashed once; None when unreadable."""
        if name not in self._digests:
            try:
                self._digests[name], size = se.sha256_file_size(os.path.join(self.path, name))
                self.files += 1
                self.bytes_hashed += size
            except OSError:
                self._digests[name] = None
        return self._digests[name]

    def parse_record(self, row: Any, where: str, seen: dict[str, str]) -> se.EnvRecord | None:
        self.records += 1
        rid = row.get("id") if isinstance(row, dict) else None
        try:
            record = se.EnvRecord.from_dict(row, where)
        except se.CorpusError as exc:
            self.problem(
                where,
                str(exc).removeprefix(f"{where}: ").removeprefix(f"{where} (id {rid!r}): "),
                rid if isinstance(rid, str) else None,
            )
            return None
        if record.id in seen:
            self.problem(where, f"duplicate id (first at {seen[record.id]})", record.id)
            return None
        seen[record.id] = where
        return record

    def report(self) -> VerifyReport:
        return VerifyReport(
            self.path, self.records, self.files, self.bytes_hashed, tuple(self.problems)
        )


def _jsonl_rows(checker: _Checker, file: Path, label: str) -> list[tuple[int, Any]]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        checker.problem(label, f"cannot read ({exc.strerror})")
        return []
    try:  # one decode of the whole file is faster; a file with bad bytes is parsed line by line
        lines: list[str | bytes] = list(data.decode("utf-8").split("\n"))
    except UnicodeDecodeError:
        lines = list(data.split(b"\n"))
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            checker.problem(
                f"{label} line {number}",
                f"invalid JSON ({getattr(exc, 'msg', 'not UTF-8')}); the line is truncated or corrupt",
            )
    return rows


def _parse_checksums(checker: _Checker, file: Path) -> dict[str, str]:
    entries, problems = se.parse_checksums(file.read_text(encoding="utf-8", errors="replace"))
    for number, message in problems:
        checker.problem(f"checksums.sha256 line {number}", message)
    for name in list(entries):
        if name not in se.RESERVED_FILES and se.unsafe_file_problem(name):
            checker.problem(
                "checksums.sha256", f"lists {name!r}, which is not a path inside the corpus"
            )
            del entries[name]
    return entries


def _verify_directory(checker: _Checker) -> None:
    path = checker.path
    manifest = path / "manifest.jsonl"
    if not manifest.is_file():
        raise se.CorpusError(f"{path}: no manifest.jsonl; is this a SPADE corpus directory?")
    checksums_file = path / "checksums.sha256"
    checksums = _parse_checksums(checker, checksums_file) if checksums_file.is_file() else None
    if checksums is None:
        checker.problem(
            "checksums.sha256", "missing; regenerate it with `spade-corpus pack` (or sha256sum)"
        )
    owner: dict[str, str] = {}
    seen: dict[str, str] = {}
    for number, row in _jsonl_rows(checker, manifest, "manifest.jsonl"):
        where = f"manifest.jsonl line {number}"
        record = checker.parse_record(row, where, seen)
        if record is None:
            continue
        if not record.file:
            checker.problem(where, "no 'file' field", record.id)
            continue
        unsafe = se.unsafe_file_problem(record.file)
        if unsafe:
            checker.problem(where, unsafe, record.id)
            continue
        owner[record.file] = record.id
        digest = checker.file_digest(record.file)
        if digest is None:
            checker.problem(record.file, "file is missing or unreadable", record.id)
        elif digest != record.sha256:
            checker.problem(
                record.file,
                f"SHA-256 {digest[:12]}… but the manifest says {record.sha256[:12]}…; the file was modified or truncated",
                record.id,
            )
        if checksums is not None and record.file not in checksums:
            checker.problem(record.file, "not listed in checksums.sha256", record.id)
    for name, expected in (checksums or {}).items():
        digest = checker.file_digest(name)
        if digest is None:
            checker.problem(
                name, "listed in checksums.sha256 but missing or unreadable", owner.get(name)
            )
        elif digest != expected:
            checker.problem(
                name,
                "SHA-256 does not match checksums.sha256; the file was modified or truncated",
                owner.get(name),
            )
    for name in ("validation_manifest.jsonl",):
        if (path / name).is_file():
            _jsonl_rows(checker, path / name, name)
    summary = path / "validation_summary.json"
    if summary.is_file():
        try:
            json.loads(summary.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            checker.problem("validation_summary.json", "invalid JSON")


def _verify_rows(checker: _Checker, rows: Iterable[tuple[int, Any]], label: str) -> None:
    seen: dict[str, str] = {}
    for number, row in rows:
        where = f"{label} line {number}" if label.endswith(".jsonl") else f"{label} row {number}"
        record = checker.parse_record(row, where, seen)
        if record is None:
            continue
        source = row.get("source")
        if not isinstance(source, str):
            checker.problem(where, "missing required field 'source'", record.id)
            continue
        checker.bytes_hashed += len(source.encode("utf-8"))
        if se.sha256_text(source) != record.sha256:
            checker.problem(
                where,
                "source SHA-256 does not match its 'sha256' field; the record was modified or truncated",
                record.id,
            )


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Re-check every file and record of a corpus directory, ``.jsonl`` or ``.parquet``.

    Raises ``spade_envs.CorpusError`` only when ``path`` is not a corpus at all (missing, no
    manifest, unreadable Parquet); everything wrong inside a corpus is a :class:`Problem`.
    """
    corpus_path = se.resolve_corpus_path(path)
    checker = _Checker(corpus_path)
    if corpus_path.is_dir():
        _verify_directory(checker)
    elif corpus_path.suffix == ".jsonl":
        checker.files = 1
        _verify_rows(checker, _jsonl_rows(checker, corpus_path, corpus_path.name), corpus_path.name)
        sidecar = meta_path(corpus_path)
        if sidecar.is_file():
            try:
                header = json.loads(sidecar.read_bytes())
            except (json.JSONDecodeError, UnicodeDecodeError):
                header = None
            if not isinstance(header, dict) or header.get("format") != PACK_FORMAT:
                checker.problem(sidecar.name, "not a valid pack header; re-pack the corpus")
    elif corpus_path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(corpus_path).to_pylist()
        except Exception as exc:
            raise se.CorpusError(
                f"{corpus_path.name}: not a readable Parquet file ({exc})"
            ) from None
        checker.files = 1
        _verify_rows(checker, enumerate(rows, 1), corpus_path.name)
    else:
        raise se.CorpusError(
            f"{corpus_path}: not a corpus; pass a directory, a .jsonl or a .parquet file"
        )
    return checker.report()


def _error(command: str, message: object) -> int:
    print(f"spade-corpus {command}: error: {message}", file=sys.stderr)
    return 2


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus verify``."""
    parser.add_argument("path", help="corpus directory, .jsonl or .parquet file, or 'example'")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_verify(args: argparse.Namespace) -> int:
    """``spade-corpus verify PATH``: 0 when clean, 1 listing each problem on its own line, 2 on bad input."""
    try:
        report = verify(args.path)
    except se.CorpusError as exc:
        return _error("verify", exc)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok:
        print(
            f"ok: {report.records} records, {report.files} files, {report.bytes_hashed} bytes verified in {report.path}"
        )
    else:
        for problem in report.problems:
            print(problem)
        bad = report.bad_records()
        print(
            f"FAILED: {len(report.problems)} problem(s), {len(bad)} bad record(s) of {report.records}",
            file=sys.stderr,
        )
    return 0 if report.ok else 1


def add_checksum_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus checksum``."""
    parser.add_argument("path", help="corpus directory, .jsonl or .parquet file, or 'example'")
    parser.add_argument("--revision", help="revision string to record (default: a content hash)")


def run_checksum(args: argparse.Namespace) -> int:
    """``spade-corpus checksum PATH``: print the manifest summary as JSON (the corpus must verify)."""
    try:
        corpus = se.load_corpus(args.path)
    except se.CorpusError as exc:
        return _error("checksum", f"{exc} (`spade-corpus verify {args.path}` lists every problem)")
    print(json.dumps(corpus_manifest(corpus, args.revision), indent=2))
    return 0
