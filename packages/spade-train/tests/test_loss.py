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
