"""The PPO-clip loss against numbers worked out by hand."""

import math

import pytest
import torch
from spade_train.loss import policy_loss


def test_hand_computed_example():
    # two sequences, three tokens each; the first token of each is masked out
    logp = torch.tensor([[0.0, math.log(0.5), math.log(0.9)], [0.0, math.log(0.2), math.log(0.3)]])
    old = torch.tensor([[0.0, math.log(0.25), math.log(0.9)], [0.0, math.log(0.4), math.log(0.3)]])
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[0, 1, 1], [0, 1, 1]])
    loss, metrics = policy_loss(logp, old, adv, mask, clip_eps=0.2)
    # seq 1: ratios 2.0 (clipped to 1.2 for A=+1 -> 1.2) and 1.0 -> 1.0
    # seq 2: ratios 0.5 (A=-2: min(-1.0, 0.8*-2=-1.6) = -1.6) and 1.0 -> -2.0
    expected = -(1.2 + 1.0 - 1.6 - 2.0) / 4
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert metrics["clip_frac"] == pytest.approx(0.5)
    assert metrics["ratio_mean"] == pytest.approx((2.0 + 1.0 + 0.5 + 1.0) / 4, abs=1e-6)


def test_masked_tokens_do_not_matter():
    logp = torch.tensor([[0.0, -1.0, -5.0]], requires_grad=True)
    old = torch.tensor([[0.0, -1.0, -1.0]])
    loss, _ = policy_loss(logp, old, torch.tensor([1.0]), torch.tensor([[0, 1, 0]]))
    loss.backward()
    assert logp.grad[0, 2].item() == 0.0 and logp.grad[0, 1].item() != 0.0


def test_normalizer_makes_micro_batches_add_up():
    torch.manual_seed(0)
    logp, old = torch.randn(4, 5), torch.randn(4, 5)
    adv, mask = torch.randn(4), (torch.rand(4, 5) > 0.3).int()
    full, _ = policy_loss(logp, old, adv, mask)
    n = float(mask.sum())
    parts = sum(
        policy_loss(logp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], normalizer=n)[
            0
        ]
        for i in (0, 2)
    )
    assert parts.item() == pytest.approx(full.item(), abs=1e-6)


def test_unknown_aggregation():
    with pytest.raises(ValueError, match="aggregation"):
        policy_loss(
            torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2), aggregation="x"
        )


def _tiny_batch():
    from spade_train.models import load_policy

    model, _ = load_policy("tiny:qwen3", device="cpu", dtype="float32")
    torch.manual_seed(0)
    ids = torch.randint(5, 1000, (3, 12))
    attention = torch.ones_like(ids)
    attention[2, 9:] = 0  # a shorter, right-padded row
    trained = torch.zeros_like(ids, dtype=torch.bool)
    trained[0, 7:] = True
    trained[1, 3:5] = True
    trained[2, 6:9] = True
    return model, ids, attention, trained


def test_logprobs_at_chosen_positions_equal_the_full_computation():
    from spade_train.loss import token_logprobs

    model, ids, attention, trained = _tiny_batch()
    assert model.config.model_type == "qwen3"  # a type whose head may run at chosen positions
    full_lp, full_ent = token_logprobs(model, ids, attention)
    lp, ent = token_logprobs(model, ids, attention, trained)
    assert torch.allclose(lp[trained], full_lp[trained], atol=1e-5)
    assert torch.allclose(ent[trained], full_ent[trained], atol=1e-4)
    assert not lp[~trained].any() and not ent[~trained].any()
    # and the gradient of a loss over the chosen positions is the same
    for values in (full_lp, lp):
        model.zero_grad()
        (values * trained).sum().backward(retain_graph=True)
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        if values is full_lp:
            want = grads
    for got, exp in zip(grads, want, strict=True):
        assert torch.allclose(got, exp, atol=1e-5)


def test_other_model_types_take_the_full_path(monkeypatch):
    from spade_train.loss import token_logprobs

    model, ids, attention, trained = _tiny_batch()
    monkeypatch.setattr(model.config, "model_type", "gemma2")  # soft-caps its logits
    monkeypatch.setattr(model, "get_decoder", None)  # the chosen-position path would fail
    lp, _ = token_logprobs(model, ids, attention, trained)
    assert lp[~trained].any()  # full path: every position has its log-prob


@pytest.mark.parametrize("prefix", [1, 6, 9])
def test_a_shared_prefix_run_once_gives_the_same_logprobs_and_gradients(prefix):
    from spade_train.loss import token_logprobs

    model, ids, attention, trained = _tiny_batch()
    ids[1:, :9] = ids[0, :9]  # three rows of one prompt (9 tokens), the last one right-padded
    trained[:, :9] = False
    trained[1, 10:] = True
    want_lp, want_ent = token_logprobs(model, ids, attention, trained)
    calls = []
    hook = model.get_decoder().register_forward_pre_hook(
        lambda _m, _a, kw: calls.append(kw["input_ids"].shape), with_kwargs=True
    )
    lp, ent = token_logprobs(model, ids, attention, trained, shared_prefix=prefix)
    hook.remove()
    assert calls == [(1, prefix), (3, 12 - prefix)]  # the prefix once, then every row's rest
    assert torch.allclose(lp, want_lp, atol=1e-5) and torch.allclose(ent, want_ent, atol=1e-4)
    assert not lp[~trained].any()
    grads = []
    for values in (want_lp, lp):
        model.zero_grad()
        (values * trained).sum().backward(retain_graph=True)
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1])
    for got, exp in zip(grads[1], grads[0], strict=True):
        assert torch.allclose(got, exp, atol=1e-5)
