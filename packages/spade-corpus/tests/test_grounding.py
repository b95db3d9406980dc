import json

import pytest
from spade_corpus.grounding import (
    GroundingError,
    GroundingSampler,
    sample_corpus_path,
    truncate_words,
)


def test_the_shipped_sample_is_the_default_and_snippets_are_real_text(monkeypatch):
    monkeypatch.delenv("CORPUS_FILE", raising=False)
    sampler = GroundingSampler()
    assert sampler.path == sample_corpus_path()
    snippets = sampler.sample(3, index=0)
    texts = {json.loads(line)["text"] for line in sample_corpus_path().read_text().splitlines()}
    assert len(snippets) == 3
    for s in snippets:
        assert 80 <= len(s.text) <= 800
        assert any(s.text in t for t in texts)


def test_corpus_file_variable_is_honoured(tmp_path, monkeypatch):
    path = tmp_path / "c.jsonl"
    path.write_text(
        "".join(json.dumps({"body": f"document {i} " + "word " * 40}) + "\n" for i in range(5))
    )
    monkeypatch.setenv("CORPUS_FILE", str(path))
    sampler = GroundingSampler(field="body")
    assert sampler.path == path
    assert sampler.sample(1)[0].text.startswith("document")


def test_the_same_seed_and_index_replay_and_others_differ():
    a, b = GroundingSampler(seed=3), GroundingSampler(seed=3)
    assert a.sample(4, index=7) == b.sample(4, index=7)
    assert a.sample(4, index=7) != a.sample(4, index=8)
    assert GroundingSampler(seed=4).sample(4, index=7) != a.sample(4, index=7)


@pytest.mark.parametrize("uniform", [False, True])
def test_a_large_file_is_sampled_without_reading_it_whole_and_covers_it(tmp_path, uniform):
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        for i in range(20_000):
            fh.write(json.dumps({"text": f"record {i:05d} " + "lorem ipsum " * 10}) + "\n")
    sampler = GroundingSampler(path, seed=1, uniform=uniform, max_chars=400)
    seen = {int(s.text.split()[1]) for i in range(50) for s in sampler.sample(4, index=i)}
    assert len(seen) > 150  # 200 draws over 20k records: nearly all distinct
    assert min(seen) < 5000 and max(seen) > 15000  # the whole file is reachable


def test_long_texts_are_cut_at_word_boundaries(tmp_path):
    path = tmp_path / "long.jsonl"
    words = [f"w{i}" for i in range(2000)]
    path.write_text(json.dumps({"text": " ".join(words)}) + "\n")
    snippet = GroundingSampler(path, max_chars=300).sample(1)[0].text
    assert len(snippet) <= 300
    assert all(token in words for token in snippet.split())


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(GroundingError, match="not found; set CORPUS_FILE"):
        GroundingSampler(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(GroundingError, match="is empty"):
        GroundingSampler(empty)
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text("not json\n" + json.dumps({"content": "x" * 500}) + "\n")
    with pytest.raises(GroundingError, match="no record with text under 'orig_doc' or 'text'"):
        GroundingSampler(wrong, max_attempts=8).sample(1)


# -- the released code's reading of a SPICE corpus (spade/core/corpus.py), restated ----------


def _jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_orig_doc_is_read_before_text_and_text_is_the_fallback(tmp_path):
    # upstream: obj.get("orig_doc") or obj.get("text") — the first non-empty one
    path = _jsonl(
        tmp_path / "spice.jsonl",
        [
            {"orig_doc": "spice body " * 20, "text": "chunk text " * 20},
            {"orig_doc": "", "text": "fallback body " * 20},
        ],
    )
    sampler = GroundingSampler(path, seed=0)
    docs = {sampler.document(index=i).text for i in range(40)}
    assert docs == {("spice body " * 20).strip(), ("fallback body " * 20).strip()}
    assert not any(d.startswith("chunk") for d in docs)
    only_text = GroundingSampler(path, field="text")  # one named field: only that one
    assert {only_text.document(index=i).text for i in range(20)} == {
        ("chunk text " * 20).strip(),
        ("fallback body " * 20).strip(),
    }


def test_junk_lines_are_skipped_even_when_they_are_most_of_the_file(tmp_path):
    # upstream skips lines that are not JSON and records with no text; the one usable record
    # behind a long run of junk is still found, by random draws or by the usable-record index
    junk = ["not json at all", "{broken", json.dumps({"meta": 1}), json.dumps([1, 2]), "", "  "]
    real = {"text": "the only real document"}
    path = _jsonl(tmp_path / "junk.jsonl", junk * 50 + [real])
    last = path.stat().st_size - len(json.dumps(real)) - 1
    for uniform in (False, True):
        sampler = GroundingSampler(path, seed=2, uniform=uniform, max_attempts=4)
        assert sampler.document(index=0).text == "the only real document"
        assert {sampler.document(index=i).offset for i in range(10)} == {last}
    with pytest.raises(GroundingError, match="no record with text under 'orig_doc' or 'text'"):
        GroundingSampler(_jsonl(tmp_path / "all_junk.jsonl", junk), max_attempts=4).document()


@pytest.mark.parametrize(
    ("words", "limit", "cut"),
    [(5999, 6000, False), (6000, 6000, False), (6001, 6000, True), (4500, 4000, True)],
)
def test_one_document_up_to_the_word_budget_then_a_marker(tmp_path, words, limit, cut):
    # upstream: split on whitespace, keep the first max_doc_tokens words, say where it stopped
    text = "".join(f"w{i}" + ("\n\t" if i % 50 == 0 else " ") for i in range(words)).strip()
    path = _jsonl(tmp_path / "long.jsonl", [{"orig_doc": text}])
    doc = GroundingSampler(path).document(max_words=limit).text
    if not cut:
        assert doc == text  # untouched: newlines and tabs kept
        return
    body, marker = doc.rsplit("\n", 1)
    assert body.split(" ") == text.split()[:limit]
    assert marker == f"[... the document is cut here, after {limit} words]"


def test_truncate_words_keeps_short_texts_whole():
    assert truncate_words("a  b\nc", 3) == "a  b\nc"
    assert truncate_words("a  b\nc d", 3) == "a b c\n[... the document is cut here, after 3 words]"
