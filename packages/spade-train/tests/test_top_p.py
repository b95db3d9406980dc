"""Nucleus filtering by sorted values only (backends/top_p.py) against transformers' warper."""

import pytest
import torch
from spade_train.backends import local, make_backend, top_p
from spade_train.types import SamplingParams
from transformers import TopPLogitsWarper


def _both(p: float, scores: torch.Tensor, keep: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    ref = TopPLogitsWarper(p, min_tokens_to_keep=keep)(None, scores.clone())  # type: ignore[arg-type]
    fast = top_p.ExactTopP(p, keep)(None, scores.clone())  # type: ignore[arg-type]
    return ref, fast


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9, 0.95, 0.999])
@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_the_same_scores_as_transformers_bit_for_bit(p, scale):
    gen = torch.Generator().manual_seed(int(p * 1000) + int(scale))
    scores = torch.randn(6, 4096, generator=gen) * scale
    scores[1, :100] = float("-inf")  # masked tokens
    scores[2] = scores[2].round()  # many equal logits
    scores[3, 7] = 80.0  # one token holds all the mass
    ref, fast = _both(p, scores)
    assert torch.equal(ref, fast)
    kept = (fast > float("-inf")).sum(-1)
    assert kept.min() >= 1 and (kept < 4096).any()  # something was filtered, never a row


def test_a_tie_across_the_cut_takes_transformers_own_order(monkeypatch):
    scores = torch.tensor([[0.0, 1.0, 1.0, 1.0, 1.0, 3.0]])  # the cut falls among the 1.0s
    calls = []
    reference = top_p.ExactTopP(0.85).reference
    monkeypatch.setattr(
        top_p.TopPLogitsWarper, "__call__", lambda self, i, s: calls.append(1) or s * 0 - 1
    )
    out = top_p.ExactTopP(0.85)(None, scores)  # type: ignore[arg-type]
    assert calls and torch.equal(out, scores * 0 - 1)  # the reference's answer, whatever it is
    monkeypatch.undo()
    ref, fast = _both(0.85, scores)
    assert torch.equal(ref, fast) and torch.equal(fast, reference(None, scores))  # type: ignore[arg-type]


def test_min_tokens_to_keep_and_other_devices_follow_the_reference():
    scores = torch.randn(3, 512) * 10
    for keep in (1, 5, 40):
        ref, fast = _both(0.01, scores, keep)
        assert torch.equal(ref, fast)
        assert int((fast > float("-inf")).sum(-1).min()) == keep
    half = scores.to(torch.bfloat16)  # not float32: transformers' own computation
    assert torch.equal(*_both(0.9, half))


def test_options_switch_transformers_warpers_off_only_where_ours_apply():
    fast = top_p.sampling_options(0.3, 0.95, 0, "cpu")
    assert (fast["temperature"], fast["top_p"], fast["top_k"]) == (1.0, 1.0, 0)
    kinds = [type(w).__name__ for w in fast["logits_processor"]]
    assert kinds == ["TemperatureLogitsWarper", "ExactTopP"]  # transformers' order
    assert [type(w).__name__ for w in top_p.sampling_options(1.0, 0.9, 0, "cpu")[
        "logits_processor"
    ]] == ["ExactTopP"]  # fmt: skip
    for t, p, k, device in ((0.3, 1.0, 0, "cpu"), (0.3, 0.9, 20, "cpu"), (0.3, 0.9, 0, "cuda")):
        assert top_p.sampling_options(t, p, k, device) == {"temperature": t, "top_p": p, "top_k": k}


@pytest.mark.parametrize("temperature", [0.3, 1.0])
def test_generation_samples_the_same_tokens(monkeypatch, temperature):
    chats = [[{"role": "user", "content": f"Count to {i}."}] for i in (3, 4, 5)]
    params = SamplingParams(max_new_tokens=16, temperature=temperature, top_p=0.9, seed=11)
    runs = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(
                local,
                "sampling_options",
                lambda t, p, k, d: {"temperature": t, "top_p": p, "top_k": k},
            )
        backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1)
        runs.append(backend.generate(chats, params))
    fast_run, plain = runs
    assert [g.completion_ids for g in fast_run] == [g.completion_ids for g in plain]
    assert [g.logprobs for g in fast_run] == [g.logprobs for g in plain]
    assert len({tuple(g.completion_ids) for g in fast_run}) > 1
