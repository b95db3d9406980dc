import argparse
import dataclasses
import json

import pytest
import spade_envs as se
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spade_corpus.pack import add_arguments, convert, meta_path, read_corpus, run, write_packed


@pytest.fixture
def rich_corpus(tmp_path):
    """The example corpus plus what a lossless packer must carry: unknown fields of several
    kinds (dict, list, mixed types, absent in some records, present as null), a CRLF and a
    non-ASCII source, a validation row for an id not in the manifest, and a summary."""
    example = se.load_corpus("example")
    records, sources = [], dict(example.sources)
    for index, record in enumerate(example.records):
        extra = {
            "cycle": index,
            "tags": ["a", index],
            "meta": {"k": index, "ok": True},
            "mixed": index if index % 2 else str(index),
        }
        if index % 3 == 0:
            extra["sometimes"] = None if index == 0 else {"x": 1.5}
        records.append(
            dataclasses.replace(
                record, extra=extra, difficulty=None if index == 5 else record.difficulty
            )
        )
    sources[records[0].id] = sources[records[0].id].replace("\n", "\r\n") + "# é ✓ \U0001f600\r\n"
    validation = {
        **example.validation,
        "rejected_one": {"id": "rejected_one", "valid": False, "reason": "solution_fails"},
    }
    summary = {**example.summary, "total": 13, "by_reason": {"solution_fails": 1}}
    path = se.write_corpus(
        tmp_path / "rich", records, sources, validation=validation, summary=summary
    )
    return se.load_corpus(path)


def _game_bytes(path):
    corpus = se.load_corpus(path)
    return {r.id: (path / r.file).read_bytes() for r in corpus.records}


def _assert_same(a, b):
    assert [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]
    assert dict(a.sources) == dict(b.sources)
    assert dict(a.validation) == dict(b.validation)
    assert a.summary == b.summary


def test_round_trip_dir_jsonl_parquet_dir_is_lossless(rich_corpus, tmp_path):
    jsonl = convert(rich_corpus.path, tmp_path / "c.jsonl")
    parquet = convert(jsonl, tmp_path / "c.parquet")
    back = convert(parquet, tmp_path / "back")
    for path in (jsonl, parquet, back):
        _assert_same(read_corpus(path), rich_corpus)
    assert _game_bytes(back) == _game_bytes(rich_corpus.path)
    assert b"\r\n" in _game_bytes(back)[rich_corpus.records[0].id]
    assert (back / "validation_summary.json").read_text() == (
        rich_corpus.path / "validation_summary.json"
    ).read_text()
    rows = [
        json.loads(line) for line in (back / "validation_manifest.jsonl").read_text().splitlines()
    ]
    assert rows[-1]["id"] == "rejected_one"


def test_spade_envs_reads_the_packed_files(rich_corpus, tmp_path):
    for name in ("c.jsonl", "c.parquet"):
        loaded = se.load_corpus(write_packed(rich_corpus, tmp_path / name))
        assert loaded.ids() == rich_corpus.ids()
        assert dict(loaded.sources) == dict(rich_corpus.sources)
        assert [r.difficulty for r in loaded.records] == [r.difficulty for r in rich_corpus.records]
        assert (
            loaded.validation[rich_corpus.ids()[3]] == rich_corpus.validation[rich_corpus.ids()[3]]
        )
        assert loaded.records[2].extra["cycle"] == 2  # a uniform scalar field stays typed
        factory = loaded.factory(loaded.ids()[1])
        observation, _ = factory().reset(seed=0)
        assert isinstance(observation, str) and observation


def test_headers_carry_summary(rich_corpus, tmp_path):
    jsonl = write_packed(rich_corpus, tmp_path / "c.jsonl")
    header = json.loads(meta_path(jsonl).read_text())
    assert header["format"] == "spade-corpus/packed" and header["validation_summary"]["total"] == 13
    assert header["unattached_validation"] == [rich_corpus.validation["rejected_one"]]
    import pyarrow.parquet as pq

    parquet = write_packed(rich_corpus, tmp_path / "c.parquet")
    meta = json.loads(pq.read_schema(parquet).metadata[b"spade_corpus"])
    assert meta["validation_summary"] == rich_corpus.summary
    assert set(meta["json_columns"]) == {"tags", "meta", "mixed", "sometimes"}


def test_datasets_loads_jsonl_and_parquet(rich_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    example = se.load_corpus("example")
    for kind, name in (("json", "c.jsonl"), ("parquet", "c.parquet")):
        path = write_packed(example, tmp_path / name)
        dataset = datasets.load_dataset(
            kind, data_files=str(path), split="train", cache_dir=str(tmp_path / "cache")
        )
        assert dataset.num_rows == 60
        assert dataset["id"] == example.ids()
        assert dataset["source"][4] == example.sources[example.ids()[4]]
        assert {"hint", "sha256", "skill", "validation"} <= set(dataset.column_names)


def test_failed_write_leaves_nothing(rich_corpus, tmp_path):
    broken = se.Corpus(rich_corpus.path, rich_corpus.records, {}, {}, None)  # sources missing
    (tmp_path / "out").mkdir()
    for name in ("c.jsonl", "c.parquet", "d"):
        with pytest.raises((KeyError, se.CorpusError)):  # the directory writer names the record
            write_packed(broken, tmp_path / "out" / name)
    assert list((tmp_path / "out").iterdir()) == []
    unsafe = dataclasses.replace(rich_corpus.records[0], file="../escape.py")
    evil = se.Corpus(rich_corpus.path, (unsafe,), rich_corpus.sources)
    with pytest.raises(se.CorpusError, match="not a safe relative path"):
        write_packed(evil, tmp_path / "out" / "e")
    assert not (tmp_path / "escape.py").exists() and list((tmp_path / "out").iterdir()) == []


def _cli(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return run(parser.parse_args(argv))


def test_cli(tmp_path, capsys):
    out = tmp_path / "c.jsonl"
    assert _cli(["example", str(out)]) == 0 and se.load_corpus(out).ids()
    before = out.read_bytes()
    assert _cli(["example", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0] and "--overwrite" in err[0]
    assert out.read_bytes() == before
    assert _cli(["example", str(out), "--overwrite"]) == 0
    assert _cli(["example", str(tmp_path / "dir.jsonl"), "--format", "dir"]) == 0
    assert (tmp_path / "dir.jsonl" / "manifest.jsonl").is_file()
    assert _cli(["example", str(tmp_path / "plain"), "--format", "parquet"]) == 2
    assert "must be named *.parquet" in capsys.readouterr().err
    assert _cli([str(tmp_path / "missing"), str(tmp_path / "x.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    tampered = tmp_path / "t.jsonl"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[0]["source"] += "#"
    tampered.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _cli([str(tampered), str(tmp_path / "t2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and rows[0]["id"] in err[0]
    assert not (tmp_path / "t2").exists()


# Readers that split lines with str.splitlines() also split at these characters; every format
# writes them escaped (tested below). Lone surrogates cannot be written as UTF-8 at all.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
field_names = st.sampled_from(["cycle", "score", "notes", "parents", "tags", "x"])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extras=st.lists(st.dictionaries(field_names, json_values, max_size=4), min_size=2, max_size=2)
)
def test_any_unknown_fields_survive_every_format(extras, tmp_path_factory):
    example = se.load_corpus("example")
    records = [
        dataclasses.replace(r, extra=e) for r, e in zip(example.records[:2], extras, strict=True)
    ]
    sources = {r.id: example.sources[r.id] for r in records}
    root = tmp_path_factory.mktemp("prop")
    corpus = se.load_corpus(se.write_corpus(root / "d", records, sources))
    parquet = convert(corpus.path, root / "c.parquet")
    jsonl = convert(parquet, root / "c.jsonl")
    back = convert(jsonl, root / "back")
    for path in (parquet, jsonl, back):
        assert [r.to_dict() for r in read_corpus(path).records] == [r.to_dict() for r in records]


def test_unicode_line_separators_in_fields(tmp_path):
    example = se.load_corpus("example")
    hint = "first\u2028second\x85third\u2029"
    records = (dataclasses.replace(example.records[0], hint=hint), *example.records[1:])
    corpus = se.Corpus(example.path, records, example.sources, example.validation, example.summary)
    for name in ("c.jsonl", "c.parquet", "dir"):
        path = write_packed(corpus, tmp_path / name)
        assert se.load_corpus(path).records[0].hint == hint
    for name in ("c.jsonl", "dir/manifest.jsonl"):
        lines = (tmp_path / name).read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(records) and "\\u2028" in lines[0]
