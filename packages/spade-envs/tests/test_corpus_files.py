"""The file-level pieces of the corpus format: digests, checksums.sha256, atomic writes."""

import hashlib
import json
import os
import stat

import pytest
import spade_envs as se
from test_corpus import make_records


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_honours_the_umask_not_the_temp_file_mode(tmp_path, umask_022):
    target = se.atomic_write_text(tmp_path / "out.txt", "hello\n")
    assert target.read_text() == "hello\n" and _mode(target) == 0o644
    os.umask(0o077)
    again = se.atomic_write_text(tmp_path / "private.txt", "x")
    assert _mode(again) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "private.txt"]


def test_atomic_output_leaves_the_old_file_when_the_block_fails(tmp_path):
    target = tmp_path / "data.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), se.atomic_output(target) as temp:
        temp.write_text("half")
        raise RuntimeError("writer failed")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["data.json"]
    with (
        pytest.raises(se.CorpusError, match="already exists"),
        se.atomic_output(target, overwrite=False),
    ):
        pass


def test_written_corpus_directory_and_files_follow_the_umask(tmp_path, umask_022):
    records, sources = make_records(2)
    root = se.write_corpus(tmp_path / "c", records, sources)
    assert _mode(root) == 0o755 and _mode(root / "games") == 0o755
    assert all(_mode(p) == 0o644 for p in root.rglob("*") if p.is_file())
    se.write_corpus(root, records, sources, overwrite=True)
    assert _mode(root) == 0o755 and sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_sha256_file_matches_hashlib_across_chunk_boundaries(tmp_path):
    for size in (0, 1, se.CHUNK_BYTES - 1, se.CHUNK_BYTES, se.CHUNK_BYTES + 1):
        data = os.urandom(size)
        (tmp_path / "f").write_bytes(data)
        assert se.sha256_file_size(tmp_path / "f") == (hashlib.sha256(data).hexdigest(), size)


def test_checksums_text_round_trips_and_reports_every_bad_line():
    digests = {"games/b.py": "b" * 64, "a.txt": "a" * 64}
    text = se.format_checksums(digests)
    assert text == f"{'a' * 64}  a.txt\n{'b' * 64}  games/b.py\n"
    assert se.parse_checksums(text) == (digests, [])
    binary_mode = f"{'C' * 64} *c.py\r\nnot a line\n\n{'d' * 10}  d.py\n"
    entries, problems = se.parse_checksums(binary_mode)
    assert entries == {"c.py": "c" * 64}
    assert [number for number, _ in problems] == [2, 4]


@pytest.mark.parametrize(
    "file", ["../outside.py", "/etc/passwd", "games\\x.py", "manifest.jsonl", ""]
)
def test_unsafe_record_files_are_refused_on_write_and_load(tmp_path, file):
    records, sources = make_records(1)
    bad = [records[0].__class__(**{**records[0].__dict__, "file": file})]
    if file:
        with pytest.raises(se.CorpusError, match="fix its 'file' field"):
            se.write_corpus(tmp_path / "w", bad, sources)
        assert not (tmp_path / "w").exists()
    root = se.write_corpus(tmp_path / "c", records, sources)
    row = json.loads((root / "manifest.jsonl").read_text())
    (root / "manifest.jsonl").write_text(json.dumps({**row, "file": file}) + "\n")
    with pytest.raises(se.CorpusError, match="'file'"):
        se.load_corpus(root, verify=False)


def test_two_records_cannot_share_a_file(tmp_path):
    records, sources = make_records(2)
    same = [r.__class__(**{**r.__dict__, "file": "games/x.py"}) for r in records]
    with pytest.raises(se.CorpusError, match="used by another record"):
        se.write_corpus(tmp_path / "c", same, sources)


def test_extra_files_are_written_and_covered_by_checksums(tmp_path):
    records, sources = make_records(1)
    root = se.write_corpus(
        tmp_path / "c", records, sources, extra_files={"README.md": "made by a test\n"}
    )
    entries, _ = se.parse_checksums((root / "checksums.sha256").read_text())
    assert entries["README.md"] == se.sha256_text("made by a test\n")
    (root / "README.md").write_text("edited\n")
    with pytest.raises(se.ChecksumError, match="README.md"):
        se.load_corpus(root)


def test_corpus_checksum_ignores_order_and_format_but_not_content(tmp_path):
    corpus = se.load_corpus("example")
    manifest = se.corpus_manifest(corpus)
    assert manifest["corpus_sha256"] == se.corpus_checksum(reversed(corpus.records))
    assert manifest["revision"] == manifest["corpus_sha256"][:16] and manifest["total"] == len(
        corpus
    )
    changed = [
        corpus.records[0].__class__(**{**corpus.records[0].__dict__, "hint": "other"}),
        *corpus.records[1:],
    ]
    assert se.corpus_checksum(changed) != manifest["corpus_sha256"]
    assert se.record_digest(corpus.records[0]) == se.sha256_text(
        json.dumps(
            corpus.records[0].to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    )
