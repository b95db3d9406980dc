import json

import pytest
from spade_corpus.grounding import GroundingError, GroundingSampler, sample_corpus_path


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
    with pytest.raises(GroundingError, match="no record with a 'text' string"):
        GroundingSampler(wrong, max_attempts=8).sample(1)
