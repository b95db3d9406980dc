"""Prefilling each distinct prompt once (backends/shared_prefill.py)."""

import pytest
import torch
from spade_train.backends import local, make_backend, shared_prefill
from spade_train.types import SamplingParams

GROUP = [
    [{"role": "user", "content": "Write a short game about counting sheep."}],
    [{"role": "user", "content": "Write a short game about counting sheep."}],
    [{"role": "user", "content": "Name three colours."}],
    [{"role": "user", "content": "Write a short game about counting sheep."}],
    [{"role": "user", "content": "Name three colours."}],
]


def test_distinct_rows_maps_every_row_to_its_first_copy():
    ids = torch.tensor([[0, 5, 6], [1, 2, 3], [0, 5, 6], [0, 5, 7], [1, 2, 3]])
    mask = torch.ones_like(ids)
    first, inverse = shared_prefill.distinct_rows(ids, mask)  # type: ignore[misc]
    assert first.tolist() == [0, 1, 3]
    assert inverse.tolist() == [0, 1, 0, 2, 1]
    assert torch.equal(ids[first][inverse], ids)
    mask[2, 0] = 0  # the same ids under another mask are another row
    assert shared_prefill.distinct_rows(ids, mask)[0].tolist() == [0, 1, 2, 3]  # type: ignore[index]
    assert shared_prefill.distinct_rows(ids[:2], mask[:2]) is None  # nothing to share


def _generate(monkeypatch, share: bool, **kw):
    if not share:
        monkeypatch.setattr(local, "distinct_rows", lambda ids, mask: None)
    backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1, **kw)
    calls = []
    core = backend._core
    original = type(core).forward

    def counting(self, *args, **kwargs):  # records the batch of every forward pass
        calls.append(kwargs["input_ids"].shape[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(core), "forward", counting)
    params = SamplingParams(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=5)
    gens = backend.generate(GROUP, params)
    monkeypatch.setattr(type(core), "forward", original)
    assert "forward" not in core.__dict__  # the patch is gone after the call
    return gens, calls


@pytest.mark.parametrize("lora", [False, True])
def test_shared_prefill_samples_the_same_tokens_bit_for_bit(monkeypatch, lora):
    kw = {"lora": {"r": 4}} if lora else {}
    shared, shared_calls = _generate(monkeypatch, True, **kw)
    plain, plain_calls = _generate(monkeypatch, False, **kw)
    assert shared_calls[0] == 2 and plain_calls[0] == 5  # the prefill ran on 2 distinct rows
    assert set(shared_calls[1:]) == {5}  # every decoding step on the whole batch
    assert [g.completion_ids for g in shared] == [g.completion_ids for g in plain]
    assert [g.logprobs for g in shared] == [g.logprobs for g in plain]  # bit for bit
    assert [g.text for g in shared] == [g.text for g in plain]
    texts = [g.text for g in shared]
    assert len(set(texts)) > 2  # the copies of a prompt still sample apart


def test_kept_prefixes_are_not_shared(monkeypatch):
    """With multi-turn key/value reuse the cache is not empty at the first pass: the
    prefill runs as before (no row dropped)."""
    backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1, reuse_kv=True)
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=1)
    first = backend.generate(GROUP[:2], params)
    follow = [
        [*GROUP[0], {"role": "assistant", "content": g.text}, {"role": "user", "content": "Go"}]
        for g in first
    ]
    seen = []
    original = shared_prefill.shared_prefill

    def spy(model, rows, inverse):
        seen.append(rows.tolist())
        return original(model, rows, inverse)

    monkeypatch.setattr(local, "shared_prefill", spy)
    backend.generate([follow[0], follow[0]], params)
    assert seen == []  # both rows found a kept prefix: nothing to prefill twice
