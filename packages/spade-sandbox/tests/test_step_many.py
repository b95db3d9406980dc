"""SandboxedEnv.step_many: several steps in one call, with step()'s results, errors and budget."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import GAME, make_env_source
from spade_sandbox import LimitExceeded, SandboxPool, SandboxTimeout

ACTIONS = ["\\boxed{1}", "x", "\\boxed{2}", "\\boxed{3}", "\\boxed{4}", "\\boxed{5}"]
# Raises on its third step; the first two are ordinary.
RAISES = make_env_source(
    init="self.turn = 0",
    reset="self.turn = 0\nreturn 'start', {}",
    step="""
    self.turn += 1
    if self.turn == 3:
        raise KeyError("boom")
    return f"turn {self.turn}", 0.0, False, False, {}
    """,
)


def test_results_equal_single_steps_and_stop_where_the_episode_ends(config):
    with SandboxPool(config, size=2) as pool:
        single = pool.open_env(GAME, kwargs={"n": 6})
        batched = pool.open_env(GAME, kwargs={"n": 6})
        for seed in range(4):
            assert single.reset(seed=seed) == batched.reset(seed=seed)
            expected = []
            for action in ACTIONS:
                expected.append(single.step(action))
                if expected[-1][2] or expected[-1][3]:
                    break
            done, error = batched.step_many(ACTIONS)
            assert error is None
            assert done == expected  # the same results, and none after the winning step
            assert batched._budget.steps == len(expected)  # only the steps taken count
        single.close()
        batched.close()


def test_a_failing_step_returns_the_steps_before_it_and_its_error(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(RAISES)
        env.reset(seed=0)
        done, error = env.step_many(["a", "b", "c", "d"])
        assert [r[0] for r in done] == ["turn 1", "turn 2"]
        assert error is not None and "KeyError" in str(error) and error.reason == "env_exception"
        env.close()


def test_a_hanging_step_is_a_timeout_with_the_worker_replaced(config):
    hangs = make_env_source(
        header="import time", step="time.sleep(60)\nreturn 'x', 0.0, False, False, {}"
    )
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(hangs)
        env.reset(seed=0)
        done, error = env.step_many(["a", "b"])
        assert done == [] and isinstance(error, SandboxTimeout)
        assert env.reset(seed=0)[0] == "start"  # a fresh worker serves the next episode
        env.close()


def test_the_episode_step_budget_holds_across_a_batch(config):
    small = dataclasses.replace(config, limits=dataclasses.replace(config.limits, max_steps=3))
    forever = make_env_source()  # never ends
    with SandboxPool(small, size=1) as pool:
        env = pool.open_env(forever)
        env.reset(seed=0)
        done, error = env.step_many(["a"] * 5)
        assert len(done) == 3 and isinstance(error, LimitExceeded)
        with pytest.raises(LimitExceeded):
            env.step("a")
        env.close()


def test_bad_batches_are_refused_before_any_step(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(GAME)
        env.reset(seed=0)
        with pytest.raises(ValueError, match="1 to"):
            env.step_many([])
        with pytest.raises(ValueError, match="1 to"):
            env.step_many(["a"] * 33)
        with pytest.raises(TypeError):
            env.step_many(["a", 3])  # type: ignore[list-item]
        assert env._budget.steps == 0
        env.close()


def test_a_batch_can_start_from_a_kept_state_in_the_same_call(config):
    with SandboxPool(config, size=2) as pool:
        kept = pool.open_env(GAME, kwargs={"n": 6})
        plain = pool.open_env(GAME, kwargs={"n": 6})
        kept.reset(seed=5)
        assert kept.snapshot("five")
        kept.step_many(ACTIONS)  # an episode played from the reset, then back to its start
        plain.reset(seed=5)
        expected = plain.step_many(ACTIONS)
        assert kept.step_many(ACTIONS, restore="five") == expected
        assert kept.step_many(ACTIONS[:1], restore="unknown") is None  # nothing kept: no step
        with pytest.raises(ValueError, match="reset"):
            kept.step("\\boxed{1}")  # no episode under way after the refused restore
        kept.close()
        plain.close()


def test_expect_stops_the_batch_where_the_observation_changes(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(GAME, kwargs={"n": 20})
        env.reset(seed=0)
        # every reply to a wrong guess differs from the first observation: one step only
        done, error = env.step_many(["\\boxed{0}"] * 4, expect="Guess a number from 1 to 20.")
        assert error is None and len(done) == 1 and env._budget.steps == 1
        # the same reply again: the batch goes on while it repeats
        done, error = env.step_many(["\\boxed{0}"] * 4, expect=done[0][0])
        assert error is None and len(done) == 4
        env.close()
