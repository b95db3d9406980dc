"""The shipped tool-use corpus: layout, contract, reference solvers, random agent, bad arguments."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import spade_envs as se

CORPUS = se.load_corpus("tool_use")
IDS = CORPUS.ids()
SEEDS = (0, 7, 123)


def _factory(env_id):
    return CORPUS.factory(env_id)


def test_layout_and_records():
    assert se.resolve_corpus_path("tool_use") == se.tool_use_corpus_path()
    assert len(CORPUS) >= 30
    domains = Counter(r.extra["domain"] for r in CORPUS)
    assert len(domains) >= 6 and min(domains.values()) >= 3
    heldout = {r.extra["domain"] for r in CORPUS.split("heldout")}
    assert heldout == set(domains)
    for rec in CORPUS:
        assert (
            rec.skill == se.TOOL_USE and rec.file.startswith("games/game_") and len(rec.hint) >= 40
        )
        assert CORPUS.validation[rec.id]["valid"]
        assert all(se.tool_schema_problems(t) == [] for t in rec.extra["tools"])
    assert CORPUS.summary["valid"] == len(CORPUS)


@pytest.mark.parametrize("env_id", IDS)
def test_env_contract_and_declared_tools(env_id):
    rec = CORPUS.record(env_id)
    factory = _factory(env_id)
    se.check_env(factory, seeds=SEEDS, max_turns=rec.max_turns, hint=rec.hint)
    env = factory(max_turns=rec.max_turns)
    assert env.skill == se.TOOL_USE and env.domain == rec.extra["domain"]
    assert [dict(t) for t in env.tools] == rec.extra["tools"]


@pytest.mark.parametrize("env_id", IDS)
def test_reference_solver_wins_through_the_runner(env_id):
    rec = CORPUS.record(env_id)
    factory = _factory(env_id)
    specs, plans = [], []
    for seed in SEEDS:
        env = factory(max_turns=rec.max_turns)
        env.reset(seed=seed)
        plans.append(se.solution_actions(env.solution()))
        specs.append(se.EpisodeSpec(factory, seed=seed, env_id=env_id, max_turns=rec.max_turns))
        assert plans[-1][-1] not in env.reset(seed=seed)[0]  # the answer is not printed
        assert sum('"tool_calls"' in a for a in plans[-1]) >= 1  # the task needs tool calls
        calls = sum(len(json.loads(a)["tool_calls"]) for a in plans[-1] if a.startswith("{"))
        assert calls >= 2, f"{env_id}: a solution should need several tool calls"
    results = []
    for spec, plan in zip(specs, plans, strict=True):
        agent = se.ReplayAgent(plan)
        results += se.run_episodes([spec], lambda chats, agent=agent: [agent(c) for c in chats])
    assert [r.episode_return for r in results] == [1.0] * len(SEEDS), [
        r.turns[-1].observation for r in results
    ]
    assert all(any(m["role"] == "tool" for m in r.messages) for r in results)


def test_random_agent_does_markedly_worse():
    specs = [
        se.EpisodeSpec(_factory(i), seed=s, env_id=i, max_turns=CORPUS.record(i).max_turns)
        for i in IDS
        for s in range(6)
    ]
    results = se.run_episodes(specs, se.RandomToolAgent(seed=1))
    assert all(r.error is None for r in results)
    win_rate = sum(r.won for r in results) / len(results)
    assert win_rate <= 0.05
    for rec in CORPUS:
        assert rec.difficulty["random_agent_win_rate"] <= 0.05


BAD_CALLS = [
    lambda tool: {"name": "no_such_tool", "arguments": {}},
    lambda tool: {"name": tool["name"], "arguments": {"__bogus__": 1}},
    lambda tool: {
        "name": tool["name"],
        "arguments": {k: [1.5] for k in tool["parameters"]["properties"]},
    },
    lambda tool: {"name": tool["name"], "arguments": "not an object"},
    lambda tool: {"arguments": {}},
]


@pytest.mark.parametrize("env_id", IDS)
def test_bad_arguments_are_error_observations(env_id):
    env = _factory(env_id)(max_turns=40)
    env.reset(seed=2)
    for tool in env.tools:
        for make in BAD_CALLS:
            call = make(tool)
            if not tool["parameters"]["properties"] and "__bogus__" not in json.dumps(call):
                continue
            obs, reward, terminated, truncated, _ = env.step(json.dumps({"tool_calls": [call]}))
            assert "error" in obs and reward == 0.0 and not terminated and not truncated
        missing = tool["parameters"].get("required", [])
        if missing:
            obs, *_ = env.step(
                json.dumps({"tool_calls": [{"name": tool["name"], "arguments": {}}]})
            )
            assert "missing required" in obs
    obs, reward, terminated, _, _ = env.step("no call here")
    assert "tool" in obs.lower() and reward == 0.0 and not terminated
    obs, *_ = env.step(
        '<tool_call>{"name": "' + env.tools[0]["name"] + '", "arguments": {}}</tool_call>'
    )
    assert env.tools[0]["name"] in obs  # the Hermes form works without the runner too
