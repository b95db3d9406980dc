"""Group-relative advantages and per-role normalization (issue must-show (3))."""

import random
import statistics

import pytest
from spade_train.config import AdvantageConfig
from spade_train.core.advantages import compute_advantages, group_advantages, normalize_per_role


def test_group_advantages_by_hand():
    adv = group_advantages([1.0, 0.0, 5.0, 5.0, 2.0], ["a", "a", "b", "b", "c"], std_norm=False)
    assert adv == [0.5, -0.5, 0.0, 0.0, 0.0]
    adv = group_advantages([1.0, 0.0, 3.0], ["a", "a", "a"])
    # mean 4/3, std sqrt(14/9 ... ) computed by hand: values -1/3, -4/3, 5/3 over std
    std = statistics.pstdev([1.0, 0.0, 3.0])
    assert adv == pytest.approx([(1 - 4 / 3) / std, (0 - 4 / 3) / std, (3 - 4 / 3) / std], 1e-5)
    with pytest.raises(ValueError, match="group labels"):
        group_advantages([1.0], [])


def batch(scale_designer):
    rng = random.Random(0)
    rewards, groups, roles = [], [], []
    for g in range(4):
        for _ in range(8):
            rewards.append(rng.random())
            groups.append(("env", g))
            roles.append("agent")
    for p in range(4):
        for _ in range(4):
            rewards.append(scale_designer * rng.uniform(-1, 1))
            groups.append(("prompt", p))
            roles.append("designer")
    return rewards, groups, roles


def role_std(adv, roles, role):
    return statistics.pstdev([a for a, r in zip(adv, roles, strict=True) if r == role])


def test_role_normalization_gives_both_roles_unit_scale_under_100x_rewards():
    rewards, groups, roles = batch(100.0)
    cfg = AdvantageConfig(role_normalization=True, group_std_norm=False)
    adv = compute_advantages(rewards, groups, roles, cfg)
    for role in ("agent", "designer"):
        assert role_std(adv, roles, role) == pytest.approx(1.0, abs=1e-6)
        assert statistics.fmean(
            a for a, r in zip(adv, roles, strict=True) if r == role
        ) == pytest.approx(0.0, abs=1e-9)
    off = compute_advantages(
        rewards, groups, roles, AdvantageConfig(role_normalization=False, group_std_norm=False)
    )
    assert role_std(off, roles, "designer") > 50 * role_std(off, roles, "agent")


def test_normalize_per_role_leaves_constant_roles_at_zero():
    assert normalize_per_role([1.0, 1.0, 2.0, 4.0], ["a", "a", "d", "d"]) == [0.0, 0.0, -1.0, 1.0]
