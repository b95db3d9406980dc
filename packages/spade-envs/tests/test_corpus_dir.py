"""One reader of a corpus directory: loading and Gymnasium registration read through
``spade_envs.corpus_dir``, and no other module of spade-envs opens a manifest."""

import json
import re
from pathlib import Path

import pytest
import spade_envs as se
from spade_envs.corpus_dir import manifest_ids, read_directory

SRC = Path(se.__file__).parent


def test_manifest_ids_match_the_loaded_corpus_for_every_shipped_corpus():
    for path in (se.example_corpus_path(), se.starter_corpus_path(), se.tool_use_corpus_path()):
        assert manifest_ids(path) == se.load_corpus(path).ids()


def test_read_directory_returns_what_load_corpus_wraps():
    read = read_directory(se.starter_corpus_path())
    corpus = se.load_corpus("starter")
    assert read.records == corpus.records and not read.released
    assert read.sources == {r.id: corpus.source(r.id) for r in corpus}


def test_a_bad_manifest_line_is_named_the_same_by_registration_and_loading(tmp_path):
    corpus = se.load_corpus("example")
    se.write_corpus(tmp_path / "c", corpus.records, {r.id: corpus.source(r.id) for r in corpus})
    manifest = tmp_path / "c" / "manifest.jsonl"
    lines = manifest.read_text(encoding="utf-8").splitlines()
    lines[1] = json.dumps({"id": "x"})
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(se.CorpusError) as registering:
        se.register_corpus(tmp_path / "c", namespace="spade-bad")
    with pytest.raises(se.CorpusError) as loading:
        se.load_corpus(tmp_path / "c")
    assert str(registering.value) == str(loading.value)
    assert "manifest.jsonl line 2" in str(loading.value)


def test_no_other_module_reads_a_manifest():
    readers = [
        path.name
        for path in SRC.glob("*.py")
        if re.search(r"""/\s*["'](?:validation_)?manifest\.jsonl["']""", path.read_text())
        and path.name != "corpus_dir.py"
    ]
    assert readers == [], f"read corpus directories through spade_envs.corpus_dir: {readers}"
