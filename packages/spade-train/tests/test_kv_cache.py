"""The block-growing key/value cache of local generation (backends/kv_cache.py)."""

import pytest
import torch
from spade_train.backends import kv_cache, local, make_backend
from spade_train.types import SamplingParams
from test_kv_reuse import _play
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def _states(rows: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 2, n, 4, generator=g), torch.randn(rows, 2, n, 4, generator=g)


def test_a_growing_layer_holds_what_a_dynamic_layer_holds(monkeypatch):
    monkeypatch.setattr(kv_cache, "SPARE", 3)  # a reallocation every few updates
    grow, plain = kv_cache.GrowingLayer(), DynamicLayer()
    buffers = set()
    for step, n in enumerate([5, 1, 1, 1, 1, 2, 1, 4, 1]):
        k, v = _states(3, n, step)
        got, want = grow.update(k, v), plain.update(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert grow.get_seq_length() == plain.get_seq_length()
        buffers.add(grow._key_buf.data_ptr())  # type: ignore[union-attr]
    assert 1 < len(buffers) < 9  # grew in blocks: not a new buffer per update
    for layer in (grow, plain):  # a beam-style reorder replaces the keys by a new tensor
        layer.batch_select_indices(torch.tensor([2, 0]))
    k, v = _states(2, 1, 99)
    assert torch.equal(grow.update(k, v)[0], plain.update(k, v)[0])
    for layer in (grow, plain):
        layer.crop(-2)
    k, v = _states(2, 1, 100)
    assert torch.equal(grow.update(k, v)[1], plain.update(k, v)[1])
    grow.reset()
    assert grow.get_seq_length() == 0
    assert torch.equal(grow.update(k, v)[0], k)


def test_new_cache_is_filled_from_kept_keys_and_values():
    config = make_backend("local", model="tiny:qwen3", seed=0).model.config
    kv = [_states(2, 6, i) for i in range(config.num_hidden_layers)]
    cache = kv_cache.new_cache(config, kv)
    assert all(isinstance(lay, kv_cache.GrowingLayer) for lay in cache.layers)
    assert cache.get_seq_length() == 6
    assert all(torch.equal(lay.keys, k) for lay, (k, _) in zip(cache.layers, kv, strict=True))


@pytest.mark.parametrize("reuse_kv", [False, True])
def test_generation_is_unchanged_by_the_growing_cache(monkeypatch, reuse_kv):
    monkeypatch.setattr(kv_cache, "SPARE", 2)
    kw = dict(model="tiny:qwen3", seed=0, gen_batch_size=4, threads=1, reuse_kv=reuse_kv)
    growing = _play(make_backend("local", **kw))

    def plain_cache(config, kv=None):
        return DynamicCache(kv, config=config) if kv else DynamicCache(config=config)

    monkeypatch.setattr(local, "new_cache", plain_cache)
    plain = _play(make_backend("local", **kw))
    for a, b in zip(growing, plain, strict=True):
        assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
        assert [g.logprobs for g in a] == [g.logprobs for g in b]  # bit for bit


def test_a_long_generation_crosses_several_buffers(monkeypatch):
    monkeypatch.setattr(kv_cache, "SPARE", 4)
    backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1, reuse_kv=False)
    chat = [{"role": "user", "content": "Count."}]
    gens = backend.generate(
        [chat, chat], SamplingParams(max_new_tokens=24, temperature=1.0, seed=3)
    )
    assert all(len(g.completion_ids) > 0 for g in gens)
    assert all(len(g.logprobs) == len(g.completion_ids) for g in gens)
