"""Key/value reuse across the turns of multi-turn play (backends/kv_reuse.py, local backend)."""

import pytest
import torch
from spade_train.backends import make_backend
from spade_train.backends.kv_reuse import MIN_REUSE, PrefixStore
from spade_train.types import SamplingParams


def _kv(n: int, fill: float = 0.0):
    return [(torch.full((2, n, 4), fill), torch.full((2, n, 4), fill)) for _ in range(3)]


def test_take_finds_the_longest_common_prefix_and_leaves_a_token_to_feed():
    store = PrefixStore()
    base = list(range(100, 140))
    store.keep(base[:20], _kv(20, 1.0))
    store.keep(base[:30] + [7, 7], _kv(32, 2.0))
    hit = store.take(base[:30])  # the whole prompt is kept: all but its last token reused
    assert hit is not None and hit.length == 29
    assert hit.kv[0][0].shape == (2, 29, 4) and float(hit.kv[0][0][0, 0, 0]) == 2.0
    assert len(store.rows) == 2  # only a shared beginning: the row stays for its own episode
    hit = store.take(base[:30] + [7, 7, 9])
    assert hit is not None and hit.length == 32 and len(store.rows) == 1  # extended: replaced
    hit = store.take(base)
    assert hit is not None and hit.length == 20 and float(hit.kv[0][0][0, 0, 0]) == 1.0
    assert store.take(base) is None and store.bytes == 0


def test_short_prefixes_are_not_reused_and_bytes_are_bounded():
    store = PrefixStore(max_bytes=_kv_bytes(40) * 2)
    store.keep(list(range(MIN_REUSE - 1)), _kv(MIN_REUSE - 1))
    assert store.take(list(range(MIN_REUSE + 5))) is None
    for i in range(3):
        store.keep([i] * 40, _kv(40))
    assert len(store.rows) == 2 and store.bytes == _kv_bytes(40) * 2  # the oldest dropped
    assert store.take([0] * 41) is None and store.take([2] * 41) is not None


def _kv_bytes(n: int) -> int:
    return sum(k.nbytes + v.nbytes for k, v in _kv(n))


def _play(backend, turns: int = 3):
    """Three turns of six conversations; each turn appends the reply and a new observation."""
    chats = [
        [
            {"role": "system", "content": "You play a text game; answer with \\boxed{N}."},
            {"role": "user", "content": f"Guess my number from 1 to {10 + 7 * i}." * (1 + i % 3)},
        ]
        for i in range(6)
    ]
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=11)
    out = []
    for _ in range(turns):
        gens = backend.generate(chats, params)
        out.append(gens)
        chats = [
            c
            + [
                {"role": "assistant", "content": g.text},
                {"role": "user", "content": "Higher." * (i % 3 + 1)},
            ]
            for i, (c, g) in enumerate(zip(chats, gens, strict=True))
        ]
    return out


@pytest.mark.parametrize("batch", [6, 4])
def test_reuse_gives_the_tokens_and_logprobs_of_a_full_re_encode(batch):
    # float32 on a GPU too: in CUDA's default bfloat16 the two differed by up to 1.1e-3 (H200)
    kw = dict(model="tiny:qwen3", seed=0, gen_batch_size=batch, threads=1, dtype="float32")
    fresh = make_backend("local", reuse_kv=False, **kw)
    reusing = make_backend("local", reuse_kv=True, **kw)
    full, reused = _play(fresh), _play(reusing)
    for a, b in zip(full, reused, strict=True):
        assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
        assert [g.prompt_ids for g in a] == [g.prompt_ids for g in b]
        for ga, gb in zip(a, b, strict=True):
            assert ga.logprobs == pytest.approx(gb.logprobs, abs=1e-4)
    counts = reusing.prompt_tokens
    assert counts["reused"] > 0 and fresh.prompt_tokens["reused"] == 0
    total = sum(len(g.prompt_ids) for turn in reused for g in turn)
    assert counts["reused"] + counts["new"] == total == fresh.prompt_tokens["new"]
    # every later turn reuses at least the prompt of the turn before (the tiny model's random
    # replies may re-render differently after it: Qwen3's template rewrites <think> blocks)
    earlier = sum(len(g.prompt_ids) - 1 for turn in reused[:-1] for g in turn)
    assert counts["reused"] >= earlier


def test_a_train_step_drops_the_kept_rows():
    from spade_train.types import TrainSample

    backend = make_backend("local", model="tiny:qwen3", seed=0, lr=1e-3)
    gens = _play(backend, turns=1)[0]
    assert backend.prefixes.rows
    sample = TrainSample(
        gens[0].prompt_ids + gens[0].completion_ids,
        [0] * len(gens[0].prompt_ids) + [1] * len(gens[0].completion_ids),
        [0.0] * len(gens[0].prompt_ids) + gens[0].logprobs,
        1.0,
        "agent",
    )
    metrics = backend.train_step([sample])
    assert not backend.prefixes.rows and backend.prefixes.bytes == 0
    assert metrics["sys/prompt_tokens_new"] > 0 and backend.prompt_tokens["new"] == 0
