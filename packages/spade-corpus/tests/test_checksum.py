import argparse
import dataclasses
import hashlib
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import spade_envs as se
from spade_corpus.checksum import (
    CHUNK_BYTES,
    add_checksum_arguments,
    add_verify_arguments,
    corpus_checksum,
    corpus_manifest,
    run_checksum,
    run_verify,
    sha256_file,
    verify,
)
from spade_corpus.pack import convert


@pytest.fixture
def corpus_dir(tmp_path):
    # a test that imported a game in process leaves __pycache__ in the installed corpus
    skip = shutil.ignore_patterns("__pycache__")
    return shutil.copytree(se.example_corpus_path(), tmp_path / "corpus", ignore=skip)


def _cli(add, run, argv):
    parser = argparse.ArgumentParser()
    add(parser)
    return run(parser.parse_args(argv))


def test_sha256_file_streams_large_files(tmp_path):
    data = os.urandom(2 * CHUNK_BYTES + 12345)
    file = tmp_path / "big.bin"
    file.write_bytes(data)
    assert sha256_file(file) == hashlib.sha256(data).hexdigest()
    source = se.load_corpus("example").sources["math_modular_chain"]
    (tmp_path / "game.py").write_text(source, encoding="utf-8")
    assert sha256_file(tmp_path / "game.py") == se.sha256_text(source)


def test_manifest_counts_revision_and_whole_checksum():
    corpus = se.load_corpus("example")
    manifest = corpus_manifest(corpus)
    assert manifest["total"] == 60
    assert manifest["counts_by_skill"] == {s: 10 for s in sorted(se.SKILLS)}
    assert manifest["counts_by_split"] == {"heldout": 12, "train": 48}
    assert manifest["revision"] == manifest["corpus_sha256"][:16]
    assert corpus_manifest(corpus, "v1.2")["revision"] == "v1.2"
    # independent of manifest order, sensitive to any record field
    assert corpus_checksum(reversed(corpus.records)) == manifest["corpus_sha256"]
    changed = [dataclasses.replace(corpus.records[0], hint="another hint"), *corpus.records[1:]]
    assert corpus_checksum(changed) != manifest["corpus_sha256"]


def test_checksum_is_the_same_in_every_format(tmp_path):
    expected = corpus_manifest(se.load_corpus("example"))["corpus_sha256"]
    for name in ("c.jsonl", "c.parquet"):
        path = convert("example", tmp_path / name)
        assert corpus_manifest(se.load_corpus(path))["corpus_sha256"] == expected


def test_verify_clean_corpus(corpus_dir):
    report = verify(corpus_dir)
    assert report.ok and report.problems == ()
    assert report.records == 60
    # 60 games + manifest + validation manifest + summary + README.md, each hashed once
    assert report.files == 64
    assert report.bytes_hashed == sum(
        f.stat().st_size
        for f in corpus_dir.rglob("*")
        if f.is_file() and f.name != "checksums.sha256"
    )


def test_verify_names_every_bad_record_in_a_directory(corpus_dir):
    records = se.load_corpus(corpus_dir).records
    (corpus_dir / records[0].file).write_text("tampered", encoding="utf-8")
    data = (corpus_dir / records[3].file).read_bytes()
    (corpus_dir / records[3].file).write_bytes(data[: len(data) // 2])
    (corpus_dir / records[7].file).unlink()
    lines = (corpus_dir / "manifest.jsonl").read_text().splitlines()
    lines[10] = lines[10][:40]  # truncated JSON line
    (corpus_dir / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    (corpus_dir / "validation_summary.json").write_text("{}\n")
    report = verify(corpus_dir)
    assert not report.ok
    assert set(report.bad_records()) == {records[0].id, records[3].id, records[7].id}
    text = "\n".join(map(str, report.problems))
    assert "manifest.jsonl line 11: invalid JSON" in text
    assert "validation_summary.json: SHA-256 does not match checksums.sha256" in text
    assert "manifest.jsonl: SHA-256 does not match" in text
    assert f"{records[7].file}: record {records[7].id!r}: file is missing" in text


def test_verify_jsonl_and_parquet_name_every_bad_row(tmp_path):
    jsonl = convert("example", tmp_path / "c.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    rows[1]["source"] += "\n# edited"
    rows[5]["source"] = rows[5]["source"][:100]
    lines = [json.dumps(r) for r in rows]
    lines[8] = lines[8][:30]
    jsonl.write_text("\n".join(lines) + "\n")
    report = verify(jsonl)
    assert report.bad_records() == [rows[1]["id"], rows[5]["id"]]
    assert any(p.where == "c.jsonl line 9" and "invalid JSON" in p.message for p in report.problems)
    assert report.records == 59
    (tmp_path / "c.jsonl.meta.json").write_text("{truncated")
    assert any(p.where == "c.jsonl.meta.json" for p in verify(jsonl).problems)

    parquet = convert("example", tmp_path / "c.parquet")
    table = pq.read_table(parquet)
    sources = table.column("source").to_pylist()
    sources[2], sources[11] = "x", sources[11] + " "
    table = table.set_column(table.schema.get_field_index("source"), "source", pa.array(sources))
    pq.write_table(table, parquet)
    assert verify(parquet).bad_records() == [rows[2]["id"], rows[11]["id"]]


def test_verify_cli_exit_codes(corpus_dir, capsys):
    assert _cli(add_verify_arguments, run_verify, [str(corpus_dir)]) == 0
    assert "ok: 60 records" in capsys.readouterr().out
    records = se.load_corpus(corpus_dir).records
    for rec in (records[2], records[9]):
        (corpus_dir / rec.file).write_text("# gone\n")
    assert _cli(add_verify_arguments, run_verify, [str(corpus_dir)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        sum(records[2].id in line for line in out) >= 1
        and sum(records[9].id in line for line in out) >= 1
    )
    assert _cli(add_verify_arguments, run_verify, [str(corpus_dir / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0] and "Traceback" not in err[0]


def test_checksum_cli_prints_the_manifest(capsys, corpus_dir):
    assert _cli(add_checksum_arguments, run_checksum, ["example", "--revision", "r7"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["revision"] == "r7" and manifest["total"] == 60
    (corpus_dir / "games" / "game_001.py").write_text("x = 1\n")
    assert _cli(add_checksum_arguments, run_checksum, [str(corpus_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "math_modular_chain" in err[0] and "spade-corpus verify" in err[0]


def test_verify_reports_a_non_utf8_manifest_line_and_checks_the_rest(corpus_dir):
    manifest = corpus_dir / "manifest.jsonl"
    lines = manifest.read_bytes().split(b"\n")
    lines[4] = b'{"id": "\xff\xfe broken'
    manifest.write_bytes(b"\n".join(lines))
    (corpus_dir / "games" / "game_010.py").write_text("changed\n")
    report = verify(corpus_dir)
    assert any(
        p.where == "manifest.jsonl line 5" and "invalid JSON" in p.message for p in report.problems
    )
    assert se.load_corpus("example").ids()[9] in report.bad_records()
    assert report.records == 59


def test_verify_reports_paths_that_leave_the_corpus_without_reading_them(corpus_dir):
    outside = corpus_dir.parent / "secret.py"
    outside.write_text("x = 1\n")
    lines = (corpus_dir / "manifest.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    lines[0] = json.dumps({**row, "file": "../secret.py", "sha256": se.sha256_text("x = 1\n")})
    (corpus_dir / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    with open(corpus_dir / "checksums.sha256", "a") as sums:
        sums.write(f"{se.sha256_text('x = 1')}  ../secret.py\n")
    report = verify(corpus_dir)
    messages = [str(p) for p in report.problems]
    assert any(row["id"] in m and "not a safe relative path" in m for m in messages), messages
    assert any("'../secret.py', which is not a path inside the corpus" in m for m in messages)
    assert report.bad_records()[0] == row["id"]


def test_the_reexported_digests_are_spade_envs_own():
    assert (sha256_file, corpus_checksum, corpus_manifest, CHUNK_BYTES) == (
        se.sha256_file,
        se.corpus_checksum,
        se.corpus_manifest,
        se.CHUNK_BYTES,
    )
