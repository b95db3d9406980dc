"""Conformance with the released SPADE code (spade-rl/spade): its tests' inputs, fed to this
project's public API, give its tests' expected outputs.

Sources of the input/expected pairs (upstream ``tests/``): ``test_delayed_env_rewards.py``,
``test_env_reward_assignment.py``, ``test_learning_potential.py``, ``test_game_utils.py`` and
``test_token_delta.py``. Upstream's game files become :class:`EnvOutcome` s: its accumulated
actor rewards per game and step offset are ``returns_by_offset``, its cached hint reward is
``hinted_returns``. Intentional differences are listed in the spade-train README.
"""

import pytest
import spade_envs as se
from spade_train.config import RewardConfig
from spade_train.core import rewards as rw
from spade_train.core.advantages import ema_baseline_advantages, group_advantages
from spade_train.core.delayed_rewards import DelayedDesignerRewards
from spade_train.core.learning_potential import EMA, GameBaselines, LearningPotential
from spade_train.play import merge_turns
from spade_train.types import Generation

# Upstream's defaults for its delayed blend function (not the launchers', which the config uses).
BLEND_FN_DEFAULTS = dict(
    regret_weight=0.5,
    micro_lp_weight=0.5,
    regret_scale=0.15,
    micro_lp_scale=0.10,
    micro_lp_signed=True,
    micro_lp_estimator="slope",
    frontier_weight=0.0,
    frontier_scale=0.08,
    plateau_weight=0.0,
    plateau_low=0.4,
    plateau_high=0.6,
    plateau_ramp=0.25,
    regret_floor=False,
)


def game(skill="logic", window=None, hint=None, **kw):
    return rw.EnvOutcome(
        valid=True,
        skill=skill,
        returns_by_offset=window if window is not None else {},
        hinted_returns=() if hint is None else (hint,),
        **kw,
    )


def flat(returns):
    return {0: list(returns)} if returns else {}


def cfg(designer, scale, **kw):
    return RewardConfig(designer=designer, env_reward_scale=scale, **kw)


def state_with(gamma_fast=0.8, gamma_slow=0.2, **seeds):
    state = rw.RewardState(gamma_fast, gamma_slow)
    for skill, value in seeds.items():
        state.tracker(skill).update(value)
    return state


# -- test_delayed_env_rewards.py: the learning-potential variant ------------------------------


def test_delayed_baseline_rewards_are_centered_per_skill():
    state = state_with(logic=0.5, math=0.2)
    outcomes = [
        game(window=flat([0.0, 0.4])),
        game(window=flat([1.0, 1.0])),
        game("math", window=flat([0.2, 0.6])),
        game("math", window={}),
    ]
    scores = rw.score_designers(outcomes, cfg("learning-potential", 10.0), state)
    assert scores.rewards == pytest.approx([-1.0, 1.0, 1.0, -1.0])
    assert scores.raw == pytest.approx([0.3, 0.5, 0.2, 0.0])


def test_delayed_baseline_update_lp_advances_trackers_before_baselines():
    state = state_with(logic=0.0)
    outcomes = [
        game(window=flat([1.0, 1.0])),
        game(window=flat([0.0, 0.0])),
        game(window=flat([0.5, 0.5])),
    ]
    scores = rw.score_designers(
        outcomes, cfg("learning-potential", 10.0), state, update_trackers_first=True
    )
    tracker = state.tracker("logic")
    assert tracker.mu_fast == pytest.approx(0.4) and tracker.mu_slow == pytest.approx(0.1)
    assert tracker.updates == 2
    assert scores.rewards == pytest.approx(
        [4.333333333333333, -3.6666666666666665, -0.6666666666666666]
    )
    assert tracker.signed_potential() == pytest.approx(0.25)


def test_delayed_baseline_variance_reward_needs_more_than_one_play():
    state = state_with(logic=0.5)
    outcomes = [game(window=flat([0.0, 1.0])), game(window=flat([0.5]))]
    scores = rw.score_designers(outcomes, cfg("solver-variance", 2.0), state)
    assert scores.rewards == pytest.approx([1.0, -1.0])
    assert scores.raw == pytest.approx([1.0, 0.0])


# -- test_delayed_env_rewards.py: micro-LP ------------------------------------------------------


def test_micro_lp_rewards_split_the_window_into_early_and_late_halves():
    outcomes = [
        game(window={0: [0.0, 0.0], 2: [1.0, 1.0]}),
        game(window={0: [0.25, 0.25], 1: [0.75, 0.75]}),
        game("math", window={0: [1.0, 1.0], 1: [0.0, 0.0]}),
        game("math", window={}),
    ]
    scores = rw.score_designers(outcomes, cfg("micro-lp", 4.0))
    assert scores.rewards == pytest.approx([1.0, -1.0, 0.0, 0.0])
    assert scores.raw == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert rw.early_late_means({0: [1.0, 1.0], 1: [0.0, 0.0]}) == (1.0, 0.0)


def test_micro_lp_odd_window_puts_the_middle_step_in_the_late_half():
    window = {0: [0.0], 1: [0.5], 2: [1.0]}
    scores = rw.score_designers([game(window=window)], cfg("micro-lp", 10.0))
    assert scores.rewards == pytest.approx([0.0])
    assert scores.raw == pytest.approx([0.75])
    assert rw.early_late_means(window) == pytest.approx((0.0, 0.75))


def test_micro_lp_needs_at_least_two_step_offsets():
    outcomes = [game(window={0: [0.7]}), game(window={})]
    scores = rw.score_designers(outcomes, cfg("micro-lp", 10.0))
    assert scores.rewards == pytest.approx([0.0, 0.0]) and scores.raw == pytest.approx([0, 0])


# -- test_delayed_env_rewards.py: regret --------------------------------------------------------


def test_regret_floors_negatives_and_penalizes_step_timeouts():
    outcomes = [
        game(window=flat([0.2, 0.2]), hint=0.8),
        game(window=flat([0.5, 0.5]), hint=0.1),
        game("math", step_timeout=True),
        game("math"),
    ]
    scores = rw.score_designers(outcomes, cfg("regret", 10.0))
    assert scores.rewards == pytest.approx([3.0, -3.0, -2.5, 2.5])
    assert scores.raw == pytest.approx([0.6, 0.0, -0.5, 0.0])
    assert scores.metrics["designer/step_timeout_frac"] == pytest.approx(0.25)


def test_regret_reports_zero_fractions_when_every_game_is_positive():
    outcomes = [game(window=flat([0.1, 0.1]), hint=0.9), game(window=flat([0.3]), hint=0.5)]
    scores = rw.score_designers(outcomes, cfg("regret", 2.0))
    assert scores.rewards == pytest.approx([0.6, -0.6])
    assert scores.metrics["designer/masked_frac"] == 0.0


# -- test_delayed_env_rewards.py: blend ----------------------------------------------------------


def test_blend_default_weights_mask_negative_games():
    c = cfg("blend", 10.0, **BLEND_FN_DEFAULTS)
    teachable = game(window={0: [0.0, 0.0], 1: [0.6, 0.6]}, hint=0.3)
    outcomes = [
        teachable,
        game(window={0: [1.0, 1.0], 1: [1.0, 1.0]}, hint=1.0),
        game("math", window={0: [0.5, 0.5], 1: [0.1, 0.1]}),
        game("math", window={}, hint=0.15),
    ]
    assert rw.blend_value(teachable, c.variant_options()) == pytest.approx(4.0)
    assert rw.micro_lp(teachable.window()) == pytest.approx(0.6)
    assert rw.frontier_penalty(0.3) == pytest.approx(0.04)
    assert rw.plateau(0.3) == pytest.approx(0.6)
    assert rw.blend_value(outcomes[2], c.variant_options()) == pytest.approx(-3.6666666666666665)
    scores = rw.score_designers(outcomes, c)
    assert scores.rewards[0] == pytest.approx(20.0)
    assert scores.rewards[1] == pytest.approx(-20.0)
    assert scores.rewards[2] is None  # masked: never trained
    assert scores.rewards[3] == pytest.approx(0.0)
    assert scores.metrics["designer/masked_frac"] == pytest.approx(0.25)


def test_blend_plateau_config_keeps_every_game_non_negative():
    c = cfg(
        "blend",
        1.0,
        **{
            **BLEND_FN_DEFAULTS,
            "regret_weight": 1.0,
            "micro_lp_weight": 0.0,
            "plateau_weight": 1.0,
            "regret_floor": True,
        },
    )
    outcomes = [
        game(window={0: [1.0, 1.0], 1: [1.0, 1.0]}),
        game(window={0: [0.5, 0.5], 1: [0.5, 0.5]}, hint=0.8),
        game("math", window={0: [0.2, 0.2], 1: [0.2, 0.2]}, hint=0.275),
    ]
    assert [rw.blend_value(o, c.variant_options()) for o in outcomes] == pytest.approx(
        [0.0, 2.0, 0.7]
    )
    scores = rw.score_designers(outcomes, c)
    assert scores.rewards == pytest.approx([-1.0, 1.0, 0.0])


def test_blend_frontier_penalty_masks_games_that_drift_off_fifty_percent():
    c = cfg(
        "blend",
        10.0,
        **{
            **BLEND_FN_DEFAULTS,
            "regret_weight": 0.0,
            "micro_lp_weight": 0.0,
            "frontier_weight": 1.0,
        },
    )
    eased = game(window={0: [1.0, 1.0], 1: [1.0, 1.0]})
    centered = game(window={0: [0.5, 0.5], 1: [0.5, 0.5]})
    assert rw.blend_value(eased, c.variant_options()) == pytest.approx(-3.125)
    assert rw.score_designers([eased, centered], c).rewards == [None, pytest.approx(0.0)]


@pytest.mark.parametrize(("estimator", "expected"), [("slope", 1.0), ("halves", 0.75)])
def test_blend_micro_lp_estimator_switch(estimator, expected):
    assert rw.micro_lp({0: [0.0], 1: [0.5], 2: [1.0]}, slope=estimator == "slope") == pytest.approx(
        expected
    )


def test_blend_slope_estimator_weights_steps_by_rollout_count():
    c = cfg(
        "blend",
        1.0,
        **{
            **BLEND_FN_DEFAULTS,
            "regret_weight": 0.0,
            "micro_lp_weight": 1.0,
            "micro_lp_scale": 1.0,
        },
    )
    window = {0: [1.0, 1.0, 1.0, 1.0], 1: [0.0], 2: [1.0]}
    assert rw.micro_lp(window) == pytest.approx(-0.2857142857142857)
    assert rw.score_designers([game(window=window)], c).rewards == [None]


@pytest.mark.parametrize(("signed", "value", "masked"), [(True, -1.0, True), (False, 0.0, False)])
def test_blend_unsigned_micro_lp_floors_regressions(signed, value, masked):
    window = {0: [1.0, 1.0], 1: [0.0, 0.0]}
    assert rw.micro_lp(window, signed=signed) == pytest.approx(value)
    c = cfg(
        "blend",
        1.0,
        **{
            **BLEND_FN_DEFAULTS,
            "regret_weight": 0.0,
            "micro_lp_weight": 1.0,
            "micro_lp_scale": 1.0,
            "micro_lp_signed": signed,
        },
    )
    assert (rw.score_designers([game(window=window)], c).rewards[0] is None) is masked


def test_every_variant_returns_nothing_without_items():
    for name in ("learning-potential", "micro-lp", "regret", "blend"):
        assert rw.score_designers([], cfg(name, 10.0)).rewards == []


def test_blend_masking_boundary_is_strictly_negative():
    c = cfg("blend", 10.0, **BLEND_FN_DEFAULTS)
    barely = game(window={0: [0.5, 0.5], 1: [0.5, 0.5]}, hint=0.5 - 1.5e-13)
    assert -1e-9 < rw.blend_value(barely, c.variant_options()) < 0
    assert rw.score_designers([barely], c).rewards == [None]


# -- test_env_reward_assignment.py: the per-cycle path -------------------------------------------


def test_learning_potential_rewards_are_centered_per_skill():
    state = rw.RewardState(0.8, 0.2)
    outcomes = [
        rw.EnvOutcome(True, unhinted_returns=r, skill="logic") for r in ([0, 0.4], [0.8, 0.8])
    ]
    scores = rw.score_designers(
        outcomes,
        cfg("learning-potential", 10.0),
        state,
        skill_returns={"logic": [0.0, 0.4, 0.8, 0.8]},
    )
    assert scores.rewards == pytest.approx([-3.0, 3.0])
    assert scores.raw == pytest.approx([0.2, 0.8])
    assert state.tracker("logic").baseline() == 0.5


def test_lp_assignment_handles_repair_and_variance_paths():
    outcomes = [
        rw.EnvOutcome(True, unhinted_returns=[0.0, 1.0], skill="logic", first_turn_valid=False),
        rw.EnvOutcome(True, unhinted_returns=[0.0, 1.0], skill="logic"),
    ]
    scores = rw.score_designers(outcomes, cfg("solver-variance", 2.0), rw.RewardState(0.8, 0.2))
    assert scores.raw == pytest.approx([0.0, 1.5])
    assert scores.rewards == pytest.approx([-1.5, 1.5])


def test_regret_rewards_floor_negative_values():
    state = rw.RewardState(0.8, 0.2)
    outcomes = [
        rw.EnvOutcome(True, hinted_returns=[0.1], unhinted_returns=[0.3], skill="logic"),
        rw.EnvOutcome(True, hinted_returns=[1.0], unhinted_returns=[0.2], skill="logic"),
    ]
    scores = rw.score_designers(
        outcomes, cfg("regret", 10.0), state, skill_returns={"logic": [0.0, 1.0]}
    )
    assert scores.rewards == pytest.approx([-4.0, 4.0])
    assert scores.raw == pytest.approx([0.0, 0.8])
    assert state.tracker("logic").baseline() == 0.5


def test_regret_step_timeout_and_failed_first_turn_keep_bounded_signals():
    outcomes = [
        rw.EnvOutcome(True, hinted_returns=[1.0], skill="logic", step_timeout=True),
        rw.EnvOutcome(True, hinted_returns=[1.0], skill="logic", first_turn_valid=False),
        rw.EnvOutcome(True, hinted_returns=[0.5], skill="logic"),
    ]
    scores = rw.score_designers(outcomes, cfg("regret", 3.0))
    assert scores.raw == pytest.approx([-0.5, 0.0, 0.5])
    assert scores.rewards == pytest.approx([-1.5, 0.0, 1.5])


# -- test_learning_potential.py -------------------------------------------------------------------


def test_learning_potential_updates_and_serializes():
    tracker = LearningPotential(gamma_fast=0.8, gamma_slow=0.2)
    assert tracker.update(0.25) == 0.0
    assert tracker.update(0.75) == pytest.approx(0.25)
    assert tracker.signed_potential() == pytest.approx(0.25)
    assert tracker.baseline() == pytest.approx(0.35)
    restored = LearningPotential.from_state(tracker.state_dict())
    assert restored.potential() == tracker.potential()
    with pytest.raises(ValueError, match="gamma_fast"):
        LearningPotential(gamma_fast=0.2, gamma_slow=0.8)


def test_ema_and_game_baselines():
    ema = EMA(decay=0.5)
    assert ema.get() == 0.0
    assert ema.update(1.0) == 1.0
    assert ema.update(0.0) == 0.5
    baselines = GameBaselines(decay=0.5)
    assert baselines.get("game.py") == 0.0
    assert baselines.update("game.py", 1.0) == 1.0
    assert baselines.update("game.py", 0.0) == 0.5
    assert baselines.stats() == {"games": 1.0, "mean": 0.5, "min": 0.5, "max": 0.5}


# -- test_game_utils.py ---------------------------------------------------------------------------


def test_basic_reward_math():
    assert rw.plateau(0.5) == 1.0
    assert rw.plateau(0.15) == pytest.approx(0.0)
    assert rw.plateau(0.85) == pytest.approx(0.0)
    upstream = se.REWARD_BOUNDS
    assert se.episode_return(2.0, True, upstream) == 1.0
    assert se.episode_return(-2.0, True, upstream) == -1.0
    assert se.episode_return(1.0, False, upstream) == 0.0
    assert rw.env_reward_scale(2, 8, 3) == 12.0
    assert rw.env_reward_scale(0, 8, 3) == 1.0


def test_reward_normalization_per_game():
    baselines = GameBaselines(decay=0.5)
    assert ema_baseline_advantages([0.0, 1.0], ["g", "g"], baselines) == [0.0, 1.0]
    assert baselines.get("g") == 0.5
    grpo = group_advantages([0.0, 1.0], ["g", "g"], eps=1e-8)
    assert grpo == pytest.approx([-1.0, 1.0])


# -- test_delayed_env_rewards + spade_rollout: the window and the final flush -------------------


def test_delay_window_recomputes_from_later_plays_and_flushes_the_rest():
    c = cfg("regret", 1.0)
    queue = DelayedDesignerRewards(delay=2)
    made = [
        rw.EnvOutcome(True, hinted_returns=[0.9], unhinted_returns=[0.0], skill="a", env_id="e1"),
        rw.EnvOutcome(True, hinted_returns=[0.9], unhinted_returns=[0.6], skill="a", env_id="e2"),
    ]
    queue.push(0, made, ["p1", "p2"])
    queue.record_plays(1, {"e1": [0.0, 0.0], "e2": [1.0, 1.0]})
    assert queue.pop_ready(1, c).payloads == []
    queue.record_plays(2, {"e1": [1.0]})  # offset 2: outside a delay-2 window
    released = queue.pop_ready(2, c)
    assert released.payloads == ["p1", "p2"]
    # e1: 0.9 - mean(0, 0, 0) = 0.9; e2: 0.9 - mean(0.6, 1, 1) = 0.0667; centered
    assert released.scores.raw == pytest.approx([0.9, 0.9 - 2.6 / 3])
    queue.push(
        3,
        [rw.EnvOutcome(True, hinted_returns=[1.0], unhinted_returns=[0.0], skill="a", env_id="e3")],
        ["p3"],
    )
    queue.record_plays(4, {"e3": [0.5]})
    state = queue.state_dict()
    again = DelayedDesignerRewards()
    again.load_state_dict(state)
    flushed = again.flush(c)
    assert flushed.payloads == ["p3"] and flushed.scores.raw == pytest.approx([0.75])
    assert len(again) == 0


# -- test_token_delta.py: only what the policy produced is trained -------------------------------


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_loss_mask_covers_only_assistant_responses(turns):
    # Turn k's prompt extends turn k-1's prompt + completion with an observation (ids 900+k).
    generations, prompt = [], [1, 2, 3]
    for k in range(turns):
        completion = [100 + k, 101 + k, 2]  # 2 stands for the end-of-turn token
        generations.append(Generation(f"resp{k}", list(prompt), completion, [-0.5] * 3))
        prompt = prompt + completion + [900 + k, 901 + k]
    (ids, mask, logps), *rest = merge_turns(generations)
    assert not rest and len(ids) == len(mask) == len(logps)
    trained = [t for t, m in zip(ids, mask, strict=True) if m]
    assert trained.count(2) == turns  # each response ends with its end-of-turn token
    assert trained == [t for k in range(turns) for t in (100 + k, 101 + k, 2)]
    assert all(lp == 0.0 for lp, m in zip(logps, mask, strict=True) if not m)
