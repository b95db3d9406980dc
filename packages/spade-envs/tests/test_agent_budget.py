"""The agent's time is bounded by the runner and charged to the agent, never the environment."""

from __future__ import annotations

import time

import spade_envs as se

GAME = """
class WaitEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.turn = 0
        return "say anything", {}

    def step(self, action):
        self.turn += 1
        done = self.turn >= 3
        return "again", (1.0 if done else 0.0), done, False, {}

    def solution(self):
        return "\\\\boxed{x}"
"""


def slow_agent(seconds: float):
    def agent(batch):
        time.sleep(seconds)
        return ["\\boxed{x}"] * len(batch)

    return agent


def test_a_slow_agent_within_budget_plays_to_the_end():
    spec = se.EpisodeSpec(se.load_env(GAME, "WaitEnv"), seed=0, max_turns=5)
    [result] = se.run_episodes([spec], slow_agent(0.05), agent_turn_s=5.0, agent_episode_s=5.0)
    assert result.error is None and result.won


def test_past_the_turn_budget_is_the_agents_failure():
    spec = se.EpisodeSpec(se.load_env(GAME, "WaitEnv"), seed=0, max_turns=5)
    [result] = se.run_episodes([spec], slow_agent(0.2), agent_turn_s=0.1)
    assert result.error is not None and result.error.boundary == "agent"
    assert result.error.kind == "AgentTimeout" and "agent_turn_s" in result.error.message
    assert not result.step_timeout  # not the environment's timeout


def test_past_the_episode_budget_ends_the_episode_after_that_turn():
    spec = se.EpisodeSpec(se.load_env(GAME, "WaitEnv"), seed=0, max_turns=5)
    [result] = se.run_episodes([spec], slow_agent(0.15), agent_episode_s=0.25)
    assert result.error is not None and result.error.boundary == "agent"
    assert "agent_episode_s" in result.error.message and len(result.turns) == 1
