"""The episode budget counts the environment's own calls, never the agent's time between them."""

from __future__ import annotations

import time

import pytest
from conftest import make_env_source
from spade_sandbox import LimitExceeded, Limits, open_env

pytestmark = pytest.mark.timeout(60)


def _tight(config, episode_wall_s: float, call_wall_s: float = 5.0):
    limits = {**config.limits.to_dict(), "episode_wall_s": episode_wall_s}
    return config.replace(limits=Limits(**{**limits, "call_wall_s": call_wall_s}))


def test_a_slow_agent_between_steps_is_not_charged_to_the_environment(config):
    src = make_env_source(step="return 'ok', 0.0, False, False, {}")
    with open_env(src, config=_tight(config, episode_wall_s=0.5)) as env:
        env.reset(seed=0)
        for action in "abc":
            time.sleep(0.3)  # the agent "generating": 0.9 s in all, past the 0.5 s budget
            assert env.step(action) == ("ok", 0.0, False, False, {})


def test_an_environment_burning_cpu_past_the_budget_is_still_stopped(config):
    src = make_env_source(
        step="t = time.monotonic()\nwhile time.monotonic() - t < 0.3:\n    pass\n"
        "return 'busy', 0.0, False, False, {}",
        header="import time",
    )
    with open_env(src, config=_tight(config, episode_wall_s=0.5)) as env:
        env.reset(seed=0)
        env.step("a")
        with pytest.raises(LimitExceeded, match="episode_wall_s"):
            env.step("b")
