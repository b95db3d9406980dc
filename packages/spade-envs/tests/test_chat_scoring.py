"""Scoring of episodes: the strict default and the released training code's semantics."""

import pytest
import spade_envs as se

SOURCE = """
class ScoreEnv:
    skill = "Math"

    def __init__(self, max_turns=10, final=1.0, fail=None, **kwargs):
        self.max_turns = max_turns
        self.final = final
        self.fail = fail

    def reset(self, seed=None):
        if self.fail == "reset":
            raise RuntimeError("reset broke")
        return "go", {}

    def step(self, action):
        if self.fail == "step":
            raise ValueError("step broke")
        if self.fail == "timeout":
            raise TimeoutError("step ran past its limit")
        return "done", self.final, True, False, {}

    def close(self):
        pass
"""

ENDLESS = """
class EndlessEnv:
    skill = "Math"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        return "go", {}

    def step(self, action):
        return "again", 0.0, False, False, {}

    def close(self):
        pass
"""


def play(scoring, **env_kwargs):
    factory = se.load_env(SOURCE, "ScoreEnv")
    spec = se.EpisodeSpec(factory, seed=0, env_kwargs=env_kwargs)
    return se.run_episode(spec, se.ReplayAgent(["\\boxed{1}"]), scoring=scoring)


@pytest.mark.parametrize(
    ("final", "strict", "upstream"), [(1.0, 1.0, 1.0), (-3.0, 0.0, -1.0), (2.5, 1.0, 1.0)]
)
def test_return_clipping(final, strict, upstream):
    assert play("strict", final=final).episode_return == strict
    assert play("upstream", final=final).episode_return == upstream


@pytest.mark.parametrize("where", ["reset", "step"])
def test_environment_exception_scores_minus_one_upstream_and_nothing_strict(where):
    strict, upstream = play("strict", fail=where), play("upstream", fail=where)
    for result in (strict, upstream):
        assert result.error is not None and result.error.boundary == "environment"
        assert not result.step_timeout and not result.won
    assert strict.episode_return == 0.0
    assert upstream.episode_return == -1.0


def test_step_timeout_is_flagged_on_the_result():
    result = play("upstream", fail="timeout")
    assert result.step_timeout and result.error.kind == "TimeoutError"
    assert result.episode_return == -1.0
    assert play("strict", fail="timeout").step_timeout


def test_agent_failure_is_never_scored():
    def broken(batch):
        raise RuntimeError("model server down")

    spec = se.EpisodeSpec(se.load_env(SOURCE, "ScoreEnv"), seed=0)
    (result,) = se.run_episodes([spec], broken, scoring="upstream")
    assert result.error.boundary == "agent" and result.episode_return == 0.0
    assert not result.step_timeout


def test_respect_env_max_turns_caps_at_the_budget():
    factory = se.load_env(ENDLESS, "EndlessEnv")
    agent = se.ReplayAgent(["\\boxed{1}"])
    own = se.run_episode(se.EpisodeSpec(factory, max_turns=5, respect_env_max_turns=True), agent)
    assert own.truncated and len(own.turns) == 3  # the environment's own default
    budget = se.run_episode(se.EpisodeSpec(factory, max_turns=2, respect_env_max_turns=True), agent)
    assert budget.truncated and len(budget.turns) == 2  # capped by the budget
    plain = se.run_episode(se.EpisodeSpec(factory, max_turns=5), agent)
    assert len(plain.turns) == 5


def test_unknown_scoring_is_refused():
    with pytest.raises(ValueError, match="scoring"):
        se.run_episodes([], se.RandomAgent(), scoring="loose")
