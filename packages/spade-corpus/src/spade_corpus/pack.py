"""Convert a corpus between the released directory layout, JSONL and Parquet, losslessly.

Packed format
-------------
One row per record, in manifest order: the record's manifest fields (unknown fields included),
``source`` (the module text) and ``validation`` (its validation row, or absent/null). This is
what ``spade_envs.load_corpus`` reads and what ``datasets.load_dataset("json" | "parquet")``
loads. What does not belong to one record travels in a **pack header**, a JSON object::

    {"format": "spade-corpus/packed", "version": 1,
     "validation_summary": {...} | null,        # validation_summary.json
     "unattached_validation": [...],            # validation rows of ids not in the manifest
     "json_columns": [...]}                     # Parquet only, see below

* JSONL: the header is the sidecar ``<name>.meta.json`` beside ``<name>.jsonl`` (a first line
  would be read as a record by other readers). Without the sidecar the JSONL still loads, with
  no summary.
* Parquet: the header is the schema metadata key ``spade_corpus``. Known fields are typed
  columns; ``difficulty`` and ``validation`` are JSON text (``spade_envs`` decodes them).
  An unknown field is a typed column when every record has it with one scalar type, and JSON
  text otherwise (null = the record lacks the field), listed in ``json_columns`` so that
  :func:`read_corpus` restores it exactly; other readers see that JSON text.

Writes are atomic: a directory is built aside and renamed (``spade_envs.write_corpus``); a file
is written to a temporary name in the target's folder and renamed (``spade_envs.atomic_output``,
which gives the file the permissions the umask asks for). For JSONL the sidecar is renamed
first, then the data file. Lines of every format escape U+0085, U+2028 and U+2029
(``spade_envs.json_line``), so readers that split at them still see one record a line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import Any, Literal

import spade_envs as se

__all__ = [
    "FORMATS",
    "PACK_FORMAT",
    "PARQUET_METADATA_KEY",
    "PackFormat",
    "atomic_output",
    "format_of",
    "meta_path",
    "read_corpus",
    "write_packed",
    "convert",
]

PackFormat = Literal["dir", "jsonl", "parquet"]
FORMATS: tuple[str, ...] = ("dir", "jsonl", "parquet")
PACK_FORMAT = "spade-corpus/packed"
PARQUET_METADATA_KEY = b"spade_corpus"
# the record fields the format names (spade_envs.EnvRecord), in manifest order
_KNOWN_FIELDS = tuple(f.name for f in dataclasses.fields(se.EnvRecord) if f.name != "extra")


def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = True) -> ContextManager[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds
    (``spade_envs.atomic_output``, kept here under its old name)."""
    return se.atomic_output(path, overwrite=overwrite)


def format_of(path: str | os.PathLike[str]) -> PackFormat:
    """The format a path names by its suffix: ``.jsonl``, ``.parquet``, anything else a directory."""
    suffix = Path(path).suffix
    return "jsonl" if suffix == ".jsonl" else "parquet" if suffix == ".parquet" else "dir"


def meta_path(jsonl: str | os.PathLike[str]) -> Path:
    """The pack-header sidecar of a ``.jsonl`` corpus: ``<name>.meta.json``."""
    path = Path(jsonl)
    return path.with_name(path.name + ".meta.json")


def _header(corpus: se.Corpus) -> dict[str, Any]:
    ids = {r.id for r in corpus.records}
    return {
        "format": PACK_FORMAT,
        "version": 1,
        "validation_summary": corpus.summary,
        "unattached_validation": [v for k, v in corpus.validation.items() if k not in ids],
    }


def _rows(corpus: se.Corpus) -> list[dict[str, Any]]:
    rows = []
    for record in corpus.records:
        row = {**record.to_dict(), "source": corpus.sources[record.id]}
        if record.id in corpus.validation:
            row["validation"] = corpus.validation[record.id]
        rows.append(row)
    return rows


def _read_header(header: Any, where: str) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("format") != PACK_FORMAT:
        raise se.CorpusError(
            f"{where}: not a spade-corpus pack header (expected format {PACK_FORMAT!r})"
        )
    if header.get("version") != 1:
        raise se.CorpusError(
            f"{where}: pack header version {header.get('version')!r} is not supported; upgrade spade-corpus"
        )
    return header


def _write_jsonl(corpus: se.Corpus, target: Path, overwrite: bool) -> None:
    lines = [se.json_line(row) for row in _rows(corpus)]
    # the inner block (the sidecar) is renamed first, the data file last
    with (
        atomic_output(target, overwrite=overwrite) as temp,
        atomic_output(meta_path(target)) as meta_temp,
    ):
        meta_temp.write_text(
            json.dumps(_header(corpus), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        temp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _native_column(values: list[Any]) -> bool:
    kinds = {type(v) for v in values}
    return (
        len(kinds) == 1
        and kinds <= {str, int, float, bool}
        and all(not isinstance(v, int) or abs(v) < 2**63 for v in values)
    )


def _write_parquet(corpus: se.Corpus, target: Path, overwrite: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(corpus)
    extra_names = list(dict.fromkeys(k for r in corpus.records for k in r.extra))
    missing = object()
    columns: dict[str, list[Any]] = {}
    json_columns = []
    for name in (*_KNOWN_FIELDS, "source", "validation", *extra_names):
        values = [row.get(name, missing) for row in rows]
        if name in (
            "difficulty",
            "validation",
        ):  # null: none (spade_envs reads "null" as a bad dict)
            values = [missing if v is None or v is missing else json.dumps(v) for v in values]
        elif name in extra_names and not _native_column(values):
            values = [
                missing if v is missing else json.dumps(v, ensure_ascii=False) for v in values
            ]
            json_columns.append(name)
        columns[name] = [None if v is missing else v for v in values]
    header = {**_header(corpus), "json_columns": json_columns}
    text_columns = {*_KNOWN_FIELDS, "source", "validation", *json_columns} - {"max_turns"}
    arrays = {}
    for name, values in columns.items():
        kind = pa.int64() if name == "max_turns" else pa.string() if name in text_columns else None
        arrays[name] = pa.array(values, type=kind)
    table = pa.table(arrays).replace_schema_metadata(
        {PARQUET_METADATA_KEY: json.dumps(header, sort_keys=True).encode("utf-8")}
    )
    with atomic_output(target, overwrite=overwrite) as temp:
        pq.write_table(table, temp)


def write_packed(
    corpus: se.Corpus,
    path: str | os.PathLike[str],
    fmt: PackFormat | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write ``corpus`` as a directory, ``.jsonl`` or ``.parquet`` (``fmt`` or the suffix), atomically."""
    target = Path(path)
    fmt = fmt or format_of(target)
    if fmt not in FORMATS:
        raise se.CorpusError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt != "dir" and target.suffix != f".{fmt}":
        raise se.CorpusError(
            f"{target}: a {fmt} corpus must be named *.{fmt} (readers pick the format by suffix)"
        )
    if target.exists() and not overwrite:
        raise se.CorpusError(f"{target} already exists; pass --overwrite or choose another path")
    if fmt == "dir":
        if target.exists() and not target.is_dir():
            raise se.CorpusError(f"{target} is a file; a directory corpus needs a directory path")
        records = corpus.records
        ids = {r.id for r in records}
        validation = {r.id: corpus.validation[r.id] for r in records if r.id in corpus.validation}
        validation.update({k: v for k, v in corpus.validation.items() if k not in ids})
        se.write_corpus(
            target,
            records,
            corpus.sources,
            validation=validation or None,
            summary=corpus.summary,
            overwrite=overwrite,
        )
    elif fmt == "jsonl":
        _write_jsonl(corpus, target, overwrite)
    else:
        _write_parquet(corpus, target, overwrite)
    return target


def read_corpus(path: str | os.PathLike[str]) -> se.Corpus:
    """Load and verify a corpus in any format (``spade_envs.load_corpus``), restoring what the
    pack header carries: the validation summary, validation rows of ids not in the manifest,
    and Parquet's JSON-encoded unknown fields."""
    corpus = se.load_corpus(path)
    if corpus.path.is_dir():
        return corpus
    header: dict[str, Any] | None = None
    records = list(corpus.records)
    if corpus.path.suffix == ".jsonl":
        sidecar = meta_path(corpus.path)
        if sidecar.is_file():
            try:
                header = _read_header(json.loads(sidecar.read_text(encoding="utf-8")), sidecar.name)
            except json.JSONDecodeError as exc:
                raise se.CorpusError(
                    f"{sidecar.name}: invalid JSON ({exc.msg}); re-pack the corpus"
                ) from None
    else:
        import pyarrow.parquet as pq

        raw = (pq.read_schema(corpus.path).metadata or {}).get(PARQUET_METADATA_KEY)
        if raw is not None:
            try:
                header = _read_header(json.loads(raw), f"{corpus.path.name} metadata")
            except json.JSONDecodeError:
                raise se.CorpusError(
                    f"{corpus.path.name}: the spade_corpus schema metadata is not JSON; re-pack the corpus"
                ) from None
            json_columns = set(header.get("json_columns", []))
            records = [_decode_extra(r, json_columns) for r in records]
    if header is None:
        return se.Corpus(corpus.path, tuple(records), corpus.sources, corpus.validation, None)
    validation = dict(corpus.validation)
    for row in header.get("unattached_validation") or []:
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            validation[row["id"]] = row
    return se.Corpus(
        corpus.path, tuple(records), corpus.sources, validation, header.get("validation_summary")
    )


def _decode_extra(record: se.EnvRecord, json_columns: set[str]) -> se.EnvRecord:
    extra = {}
    for name, value in record.extra.items():
        if name in json_columns:
            if value is None:  # the record lacks this field
                continue
            value = json.loads(value)
        extra[name] = value
    return se.EnvRecord(**{**{k: getattr(record, k) for k in _KNOWN_FIELDS}, "extra": extra})


def convert(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    fmt: PackFormat | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Read ``source`` (verified) and write it to ``target`` in ``fmt`` (default: by suffix)."""
    src = se.resolve_corpus_path(source)
    dst = Path(target)
    if dst.exists() and dst.resolve() == src.resolve():
        raise se.CorpusError(f"{target} is the source corpus itself; choose another output path")
    return write_packed(read_corpus(src), dst, fmt, overwrite=overwrite)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus pack``."""
    parser.add_argument("source", help="corpus directory, .jsonl or .parquet file, or 'example'")
    parser.add_argument("out", help="output: a directory, or a .jsonl / .parquet file")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: from OUT's suffix; no suffix means a directory)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def run(args: argparse.Namespace) -> int:
    """``spade-corpus pack SRC OUT``: 0 on success, 2 with one line naming the problem otherwise."""
    try:
        out = convert(args.source, args.out, args.format, overwrite=args.overwrite)
    except se.CorpusError as exc:
        print(f"spade-corpus pack: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"spade-corpus pack: error: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({args.format or format_of(out)})")
    return 0
