"""Writing the corpus format, and its file-level pieces: digests, ``checksums.sha256``, atomic
writes. (:mod:`spade_envs.corpus` documents the format and reads it.)

Digests
-------
* A file's digest is the SHA-256 of its bytes (:func:`sha256_file`, streamed in
  :data:`CHUNK_BYTES` chunks); for a game file it equals :func:`sha256_text` of its source and
  the record's ``sha256`` field.
* ``checksums.sha256`` holds one ``"<sha256>  <relative path>"`` line per file, sorted by path:
  the format ``sha256sum -c`` checks (:func:`format_checksums`, :func:`parse_checksums`).

Atomic writes
-------------
A file is written to a fresh name beside its target and renamed over it (:func:`atomic_output`,
:func:`atomic_write_text`); a reader sees the old file or the new one, never a part. The
temporary file is created with mode 0o666 minus the process umask, as ``open()`` would create
the target, so the renamed file has the permissions users expect (``tempfile.mkstemp`` would
leave it 0o600). Staging directories are likewise created 0o777 minus the umask.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .errors import CorpusError

if TYPE_CHECKING:
    from .records import EnvRecord

__all__ = [
    "CHUNK_BYTES",
    "sha256_text",
    "sha256_file",
    "sha256_file_size",
    "parse_checksums",
    "format_checksums",
    "json_line",
    "atomic_output",
    "atomic_write_text",
    "RESERVED_FILES",
    "unsafe_file_problem",
    "write_corpus",
]

#: Files are hashed in reads of at most this many bytes.
CHUNK_BYTES = 1 << 20

#: Names at the top of a corpus directory that belong to the format, not to a record.
RESERVED_FILES: frozenset[str] = frozenset(
    {"manifest.jsonl", "validation_manifest.jsonl", "validation_summary.json", "checksums.sha256"}
)

# json.dumps(ensure_ascii=False) leaves these raw inside strings, and str.splitlines() (used by
# many JSONL readers) breaks lines at them; written as escapes every reader sees one line.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def sha256_text(text: str) -> str:
    """SHA-256 of ``text`` encoded as UTF-8 (how corpus files are hashed)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unsafe_file_problem(file: str) -> str | None:
    """Why ``file`` is not a safe relative path inside a corpus directory, or None when it is.

    Paths are POSIX, relative, without ``..`` or backslashes, and not one of
    :data:`RESERVED_FILES`: a manifest can then never make a reader or writer leave the corpus.
    """
    parts = PurePosixPath(file).parts
    if not parts or file.startswith("/") or "\\" in file or ".." in parts:
        return f"file {file!r} is not a safe relative path inside the corpus; fix its 'file' field"
    if file in RESERVED_FILES:
        return f"file {file!r} is a name the corpus format reserves; fix its 'file' field"
    return None


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes (a large file is streamed in ``CHUNK_BYTES`` chunks)."""
    return sha256_file_size(path)[0]


def sha256_file_size(path: str | os.PathLike[str]) -> tuple[str, int]:
    """``(digest, size in bytes)`` of a file, read once.

    A small file takes one read of its size plus one byte; a short read ends the loop, which
    for a regular file means end of file.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = hashlib.sha256()
        size = 0
        request = min(os.fstat(fd).st_size + 1, CHUNK_BYTES)
        while True:
            chunk = os.read(fd, request)
            digest.update(chunk)
            size += len(chunk)
            if len(chunk) < request:
                return digest.hexdigest(), size
            request = CHUNK_BYTES
    finally:
        os.close(fd)


def parse_checksums(text: str) -> tuple[dict[str, str], list[tuple[int, str]]]:
    """Parse ``checksums.sha256`` text into ``({path: digest}, [(line number, problem), …])``.

    Accepts both ``sha256sum`` separators (two spaces, or space and ``*`` for binary mode);
    digests are lower-cased. Blank lines are skipped; a malformed line is reported, not raised,
    so a loader can stop at the first problem and a verifier can list them all.
    """
    entries: dict[str, str] = {}
    problems: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        digest, sep, name = line.partition(" ")
        name = name[1:] if name[:1] in (" ", "*") else name
        if not sep or len(digest) != 64 or not name:
            problems.append((number, f"expected '<sha256>  <path>', got {line[:60]!r}"))
            continue
        entries[name] = digest.lower()
    return entries, problems


def format_checksums(digests: Mapping[str, str]) -> str:
    """``checksums.sha256`` text for ``{relative path: digest}``, sorted by path."""
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def json_line(row: Mapping[str, Any]) -> str:
    """One JSONL line (no newline): UTF-8 text kept, line-breaking characters escaped."""
    line = json.dumps(row, ensure_ascii=False)
    for char, escape in _LINE_BREAKS.items():
        line = line.replace(char, escape)
    return line


def _fresh_name(target: Path, suffix: str) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}{suffix}")


def _make_staging_dir(target: Path) -> Path:
    """A new empty directory beside ``target`` (mode 0o777 minus the umask)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        staging = _fresh_name(target, ".staging")
        try:
            staging.mkdir(0o777)
            return staging
        except FileExistsError:
            continue


def _create_fresh_file(target: Path) -> Path:
    """A new empty file beside ``target``, created 0o666 minus the umask."""
    while True:
        temp = _fresh_name(target, ".tmp")
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return temp
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a new empty file beside ``path``; rename it onto ``path`` only if the block succeeds.

    The file is created 0o666 minus the umask (see the module docstring) and flushed to disk
    before the rename. With ``overwrite=False`` an existing ``path`` is a :class:`CorpusError`.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise CorpusError(f"{target} already exists; pass --overwrite or choose another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = _create_fresh_file(target)
    try:
        yield temp
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, overwrite: bool = True) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_output`)."""
    with atomic_output(path, overwrite=overwrite) as temp:
        temp.write_text(text, encoding="utf-8")
    return Path(path)


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _assign_files(records: Iterable[EnvRecord], sources: Mapping[str, str]) -> list[EnvRecord]:
    """Records with their ``sha256`` recomputed and a safe, unique ``file`` each."""
    out, used = [], set()
    for index, rec in enumerate(records, 1):
        if rec.id not in sources:
            raise CorpusError(f"record {rec.id!r} has no source; pass sources[{rec.id!r}]")
        file = rec.file or f"games/game_{index:03d}.py"
        problem = unsafe_file_problem(file)
        if problem:
            raise CorpusError(f"record {rec.id!r}: {problem}")
        if file in used:
            raise CorpusError(
                f"record {rec.id!r}: file {file!r} is used by another record; give each record its own 'file'"
            )
        used.add(file)
        out.append(dataclasses.replace(rec, file=file, sha256=sha256_text(sources[rec.id])))
    return out


def write_corpus(
    path: str | os.PathLike[str],
    records: Iterable[EnvRecord],
    sources: Mapping[str, str],
    *,
    validation: Mapping[str, dict[str, Any]] | None = None,
    summary: dict[str, Any] | None = None,
    extra_files: Mapping[str, str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a corpus directory in the released layout, atomically (built aside, then renamed).

    Each record's ``file`` defaults to ``games/game_NNN.py`` (it must be a safe relative path,
    unique per record) and its ``sha256`` is recomputed from the source. ``extra_files`` maps
    more relative paths to text (a README, say). ``checksums.sha256`` covers every file written.
    Manifest lines escape U+0085, U+2028 and U+2029 so any JSONL reader sees one record a line.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise CorpusError(f"{target} already exists; pass overwrite=True or choose another path")
    if target.exists() and not target.is_dir():
        raise CorpusError(f"{target} is a file; a directory corpus needs a directory path")
    records = _assign_files(records, sources)
    texts = {rec.file: sources[rec.id] for rec in records}
    for name, text in (extra_files or {}).items():
        problem = unsafe_file_problem(name)
        if problem or name in texts:
            raise CorpusError(f"extra file {name!r}: {problem or 'a record uses this path'}")
        texts[name] = text
    texts["manifest.jsonl"] = "".join(json_line(rec.to_dict()) + "\n" for rec in records)
    if validation is not None:
        texts["validation_manifest.jsonl"] = "".join(
            json_line(v) + "\n" for v in validation.values()
        )
    if summary is not None:
        texts["validation_summary.json"] = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    staging = _make_staging_dir(target)
    try:
        for name, text in texts.items():
            _write_text(staging / name, text)
        _write_text(
            staging / "checksums.sha256",
            format_checksums({n: sha256_text(t) for n, t in texts.items()}),
        )
        if not target.exists():
            staging.rename(target)
            return target
        backup = _make_staging_dir(target.with_name(f"{target.name}.old"))
        backup.rmdir()
        target.rename(backup)
        try:
            staging.rename(target)
        except BaseException:
            backup.rename(target)  # put the old corpus back
            raise
        shutil.rmtree(backup, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
