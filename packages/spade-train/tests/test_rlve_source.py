"""The fixed-environment RLVE baseline: the sliding-window controller, the source, two cycles.

The controller cases restate the released controller's rule (spade/core/difficulty_controller.py,
``SlidingWindowController``) on accuracy streams whose outcome is worked out by hand.
"""

from __future__ import annotations

import importlib.util
import json
import random

import pytest
from spade_train.config import RecipeError, load_recipe
from spade_train.core.rlve_source import RlveSource, SlidingWindow, Window
from spade_train.loop import resume_run, start_run


def feed(ctrl: SlidingWindow, rewards, env="E", difficulty=None):
    for r in rewards:
        ctrl.update(env, ctrl.window(env).high if difficulty is None else difficulty, r)


def test_promotes_after_tau_num_plays_at_the_rate():
    ctrl = SlidingWindow(tau_acc=0.9, tau_num=8, d_delta=4)
    feed(ctrl, [1] * 7)
    assert ctrl.window("E") == Window(0, 0, 7, 7)  # not yet tau_num plays
    feed(ctrl, [1])
    assert ctrl.window("E") == Window(0, 1, 0, 0)  # promoted, counters reset


def test_below_the_rate_resets_the_counters_without_promotion():
    ctrl = SlidingWindow(tau_acc=0.9, tau_num=8, d_delta=4)
    feed(ctrl, [1] * 7 + [0])  # 7/8 = 0.875 < 0.9
    assert ctrl.window("E") == Window(0, 0, 0, 0)
    feed(ctrl, [1] * 8)  # the earlier failure no longer counts
    assert ctrl.window("E").high == 1
    # exactly at the rate promotes (>=): 9 of 10
    ctrl = SlidingWindow(tau_acc=0.9, tau_num=10)
    feed(ctrl, [1] * 9 + [0])
    assert ctrl.window("E").high == 1


def test_only_plays_at_high_count_and_any_positive_reward_is_a_success():
    ctrl = SlidingWindow(tau_acc=0.5, tau_num=2, d_delta=4)
    feed(ctrl, [1, 1])
    assert ctrl.window("E").high == 1
    feed(ctrl, [1, 1, 1], difficulty=0)  # below high: ignored
    assert ctrl.window("E") == Window(0, 1, 0, 0)
    feed(ctrl, [0.25, -1.0])  # 1 success of 2 = 0.5
    assert ctrl.window("E").high == 2
    feed(ctrl, [0.0, -0.5])
    assert ctrl.window("E") == Window(0, 2, 0, 0)


def test_window_width_is_bounded_by_d_delta_and_high_by_the_maximum():
    ctrl = SlidingWindow(tau_acc=0.9, tau_num=1, d_delta=4, max_difficulty=6)
    highs, lows = [], []
    for _ in range(8):
        feed(ctrl, [1])
        highs.append(ctrl.window("E").high)
        lows.append(ctrl.window("E").low)
    assert highs == [1, 2, 3, 4, 5, 6, 6, 6]
    assert lows == [0, 0, 0, 1, 2, 3, 3, 3]
    draws = {ctrl.sample("E", random.Random(s)) for s in range(200)}
    assert draws == {3, 4, 5, 6}
    assert ctrl.window("other") == Window()  # environments are independent
    assert ctrl.metrics() == {
        "difficulty/avg_high": 3.0,
        "difficulty/avg_low": 1.5,
        "difficulty/max_high": 6.0,
    }


def test_the_launchers_parameters_on_a_long_stream():
    # tau_num 128: 127 wins then a loss is 127/128 >= 0.9 (promote); 115/128 < 0.9 (stay)
    ctrl = SlidingWindow(tau_acc=0.9, tau_num=128, d_delta=4)
    feed(ctrl, [1] * 127 + [0])
    feed(ctrl, [1] * 115 + [0] * 13)
    assert ctrl.window("E") == Window(0, 1, 0, 0)
    feed(ctrl, [1] * 116 + [0] * 12)  # 116/128 = 0.906
    assert ctrl.window("E") == Window(0, 2, 0, 0)
    restored = SlidingWindow()
    restored.load_state_dict(json.loads(json.dumps(ctrl.state_dict())))
    assert restored.windows == ctrl.windows


needs_rlve = pytest.mark.skipif(
    importlib.util.find_spec("Gym") is None, reason="rlve-gym is not installed (spade-train[rlve])"
)


def rlve_cfg(*extra):
    return load_recipe(
        "quickstart",
        [
            "mode=fixed-rlve",
            "backend.model=tiny:qwen3",
            "backend.micro_batch_size=8",
            "backend.max_seq_len=1024",
            "agent.envs_per_cycle=2",
            "agent.episodes_per_env=2",
            "agent.max_turns=2",
            "agent.sampling.max_new_tokens=8",
            "logging.progress=false",
            "logging.transcripts_per_cycle=4",
            "rlve.envs=[Division,Sorting,Multiplication]",
            "rlve.tau_num=2",
            *extra,
        ],
    )


@needs_rlve
def test_source_proposes_same_problem_groups_and_resumes_its_state():
    cfg = rlve_cfg()
    src = RlveSource(cfg.rlve, seed=0, max_turns=4)
    entries = src.propose(1, 2)
    assert len({e.origin for e in entries}) == 2 and all(e.max_turns == 1 for e in entries)
    for entry in entries:
        factory = src.factory(entry)
        prompts = {factory().reset(seed=s)[0] for s in range(3)}
        assert len(prompts) == 1  # one problem per group
        src.observe(entry, [1.0, 1.0])
    assert all(src.controller.window(e.origin).high == 1 for e in entries)
    again = RlveSource(cfg.rlve, seed=5, max_turns=4)
    again.load_state_dict(json.loads(json.dumps(src.state_dict())))
    assert [e.env_id for e in again.propose(2, 2)] == [e.env_id for e in src.propose(2, 2)]
    with pytest.raises(RecipeError, match="setting=games"):
        rlve_cfg("setting=tool-use", "designer.skills=[x]")
    with pytest.raises(ValueError, match="rlve.envs: unknown RLVE environment"):
        RlveSource(rlve_cfg("rlve.envs=[Nope]").rlve, seed=0, max_turns=1)


@pytest.mark.slow  # 7-13 s on two shared cores
@needs_rlve
def test_two_cycles_of_a_tiny_policy_on_rlve(tmp_path):
    cfg = rlve_cfg("cycles=2")
    loop = start_run(cfg, tmp_path / "run", progress=False)
    rows = loop.train()
    assert loop.res is not None and loop.res.pools == ()  # RLVE is package code: no sandbox
    assert [r["cycle"] for r in rows] == [1, 2]
    for row in rows:
        assert row["play/envs"] == 2 and row["play/episodes"] == 4  # unhinted only
        assert row["play/errors"] == 0 and row["play/return_hint"] is None
        assert row["adv/designer_n"] == 0 and row["train/samples"] > 0
        assert row["pool/size"] == 0 and row["difficulty/max_high"] >= 0
    transcripts = sorted((tmp_path / "run/transcripts/cycle_0001").glob("*.json"))
    first = json.loads(transcripts[0].read_text())
    assert "\\boxed{...}" in first["messages"][1]["content"] and len(first["turns"]) == 1
    state = json.loads((tmp_path / "run/checkpoints/cycle_0002/state.json").read_text())
    assert set(state["curriculum"]["windows"]) <= {"Division", "Sorting", "Multiplication"}
    # resuming a finished run restores the controller and runs nothing more
    loop = resume_run(tmp_path / "run", progress=False)
    assert (
        loop.cycle == 2
        and loop.state.source.rlve.controller.state_dict() == state["curriculum"]["windows"]
    )
    # the policy is loaded when the run starts; nothing was opened by the restore
    assert loop.res is None and loop.policy_checkpoint == latest_policy(tmp_path / "run")
    assert loop.train()[-1]["cycle"] == 2  # a finished run: nothing more to do
    assert loop.res is not None and loop.res.pools == ()


def latest_policy(run):
    return run / "checkpoints" / (run / "checkpoints/LATEST").read_text().strip() / "policy"


def test_the_rlve_section_is_strict():
    cfg = load_recipe("fixed-rlve-4b")
    assert cfg.mode == "fixed-rlve" and cfg.rlve.envs == "official16"
    assert (cfg.rlve.tau_acc, cfg.rlve.tau_num, cfg.rlve.d_delta) == (0.9, 128, 4)
    assert (cfg.agent.envs_per_cycle, cfg.agent.episodes_per_env) == (16, 16)
    for size in ("8b", "30b"):
        assert load_recipe(f"fixed-rlve-{size}").rlve == cfg.rlve
    for override, message in [
        ("rlve.tau_numm=3", "did you mean tau_num"),
        ("rlve.envs=official17", "use official16, all or a list"),
        ("rlve.envs=[]", "the list is empty"),
        ("rlve.tau_acc=1.5", "rlve.tau_acc"),
        ("rlve.reward=partial", "rlve.reward"),
    ]:
        with pytest.raises(RecipeError, match=message):
            load_recipe("fixed-rlve-4b", [override])


@needs_rlve
def test_an_environment_whose_generator_keeps_failing_is_skipped(monkeypatch):
    import spade_envs as se

    def failing(name, difficulty, rng, tries=10):
        if name == "Sorting":
            raise se.SourceError("RLVE generator failed 10 times for Sorting at difficulty 0")
        return {"x": 1}, 5

    monkeypatch.setattr(se, "rlve_same_problem", failing)
    src = RlveSource(rlve_cfg("rlve.envs=[Sorting,Division]").rlve, seed=0, max_turns=1)
    entries = src.propose(1, 4)
    assert [e.origin for e in entries] == ["Division"]
    assert src.metrics()["rlve/create_failed"] == 1.0
