"""Conformance of the paper recipes with the released launchers and code (spade-rl/spade):
in-loop evaluation, the Tinker defaults, invalid designs, and the sliding-window difficulty of
the fixed-environment RLVE baseline.

Facts restated from upstream (in our words):

* In-loop evaluation: the games, fixed GPT-5.5 and RLVE launchers set ``--eval-interval
  100000`` (never within 400 rollouts); tool use 4B evaluates every 48 rollouts, 8B/30B every 32
  (``_train_spade_blend.sh``), on the AIME avg@32 set and the in-loop GEM suite.
* Tinker (``train_spade_tinker.py`` defaults the launchers keep): designer reward
  ``learning_potential``, agent rewards normalised by a per-game EMA baseline, loss
  ``importance_sampling``, ``num_train_datapoints // batch_size`` = 12800 // 128 = 100 batches.
* A design slot whose every attempt fails leaves no designer sample (``generate_games_async``
  keeps only successful games), so no penalty reaches the policy.
* RLVE's sliding window (``SlidingWindowController`` built by ``create_difficulty_controller``
  with the launchers' ``tau_acc 0.9, tau_num 128, d_delta 4`` and its default maximum 20): the
  window values below were produced by running upstream's controller on the same stream.
"""

from __future__ import annotations

import random

import pytest
from spade_train.config import load_recipe
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedDesignerRewards

GAMES_LIKE = [
    *(f"spade-games-{s}" for s in ("4b", "8b", "30b")),
    *(f"fixed-static-{s}" for s in ("4b", "8b", "30b")),
    *(f"fixed-rlve-{s}" for s in ("4b", "8b", "30b")),
    "ablation-no-grounding",
    "ablation-learning-potential",
]
TINKER = [
    "tinker-qwen3-8b",
    "tinker-qwen3-8b-base",
    "tinker-qwen3-4b-instruct",
    "tinker-qwen3-30b-instruct",
    "tinker-gpt-oss-20b",
]


@pytest.mark.parametrize("name", GAMES_LIKE)
def test_games_launchers_never_evaluate_in_the_loop(name: str) -> None:
    assert load_recipe(name).eval.every == 0


@pytest.mark.parametrize(
    ("name", "every"),
    [("spade-tool-use-4b", 48), ("spade-tool-use-8b", 32), ("spade-tool-use-30b", 32)],
)
def test_tool_use_launchers_evaluate_on_their_interval(name: str, every: int) -> None:
    cfg = load_recipe(name)
    assert (cfg.eval.every, cfg.eval.config) == (every, "inloop")


@pytest.mark.parametrize("name", TINKER)
def test_tinker_recipes_keep_upstreams_tinker_defaults(name: str) -> None:
    cfg = load_recipe(name)
    assert cfg.reward.designer == "learning-potential"
    assert cfg.advantage.agent == "ema-baseline"
    assert cfg.advantage.game_baseline_decay == 0.5
    assert cfg.backend.typed_options().loss == "importance_sampling"
    assert cfg.cycles == 12800 // 128
    assert (cfg.reward.lp_gamma_fast, cfg.reward.lp_gamma_slow) == (0.98, 0.85)
    assert cfg.reward.delay_cycles == 0 and not cfg.reward.train_invalid


@pytest.mark.parametrize("name", [*GAMES_LIKE[:3], "spade-tool-use-8b", *TINKER])
def test_paper_recipes_never_train_an_invalid_design(name: str) -> None:
    assert load_recipe(name).reward.train_invalid is False


def _outcomes():
    return [
        rw.EnvOutcome(True, hinted_returns=[0.9], unhinted_returns=[0.1], skill="a", env_id="e1"),
        rw.EnvOutcome(False, reason="syntax_error", skill="a"),
        rw.EnvOutcome(True, hinted_returns=[0.5], unhinted_returns=[0.5], skill="a", env_id="e2"),
        rw.EnvOutcome(False, reason="validation_timeout", timed_out=True, skill="a"),
    ]


def test_an_invalid_design_is_masked_not_penalised() -> None:
    cfg = load_recipe("spade-games-4b").reward.model_copy(  # regret: no blend options
        update={"designer": "regret", "env_reward_scale": 1.0, "options": {}}
    )
    scores = rw.score_designers(_outcomes(), cfg)
    # regret 0.8 and 0.0 centered over the two valid designs only; no sample for the others
    assert scores.rewards == [pytest.approx(0.4), None, pytest.approx(-0.4), None]
    penalised = rw.score_designers(_outcomes(), cfg.model_copy(update={"train_invalid": True}))
    assert penalised.rewards[1] == -1.0 and penalised.rewards[3] == -0.5
    assert penalised.rewards[0] == pytest.approx(0.4)  # penalties stay out of centering
    # the delayed queue releases them masked as well
    queue = DelayedDesignerRewards(delay=1)
    queue.push(1, _outcomes(), ["p1", "p2", "p3", "p4"])
    released = queue.pop_ready(2, cfg)
    assert released.payloads == ["p1", "p2", "p3", "p4"]
    assert [r is None for r in released.rewards] == [False, True, False, True]


# -- RLVE: the sliding window of the fixed-rlve recipes -----------------------------------------


def _controller(name: str = "fixed-rlve-4b"):
    pytest.importorskip("Gym.parameter_controllers")
    from spade_train.core.rlve_source import RlveSource

    cfg = load_recipe(name)
    return RlveSource(cfg.rlve, seed=0, max_turns=cfg.agent.max_turns).controller


# (plays fed as (difficulty, reward), window after them as upstream's controller gives it:
#  (low, high, successes at high, attempts at high))
STREAM = [
    ([(0, 1.0)] * 127, (0, 0, 127, 127)),  # not yet tau_num plays at high
    ([(0, 1.0)], (0, 1, 0, 0)),  # 128/128: promoted, counters reset
    ([(0, 1.0)] * 50, (0, 1, 0, 0)),  # plays below high are not counted
    ([(1, 1.0)] * 115 + [(1, 0.0)] * 13, (0, 1, 0, 0)),  # 115/128 < 0.9: reset, no promotion
    ([(1, 1.0)] * 116 + [(1, 0.0)] * 12, (0, 2, 0, 0)),  # 116/128 >= 0.9
    ([(2, 1.0)] * 128, (0, 3, 0, 0)),
    ([(3, 1.0)] * 128, (1, 4, 0, 0)),  # the window is at most d_delta = 4 wide
    ([(4, 1.0)] * 128, (2, 5, 0, 0)),
    ([(5, 1.0)] * 128, (3, 6, 0, 0)),
    ([(5, 0.5)] * 120 + [(5, -1.0)] * 8, (3, 6, 0, 0)),  # difficulty 5 is below high now
]


@pytest.mark.parametrize("name", ["fixed-rlve-4b", "fixed-rlve-8b", "fixed-rlve-30b"])
def test_the_recipes_controller_gives_upstreams_windows(name: str) -> None:
    ctrl = _controller(name)
    assert (ctrl.tau_acc, ctrl.tau_num, ctrl.d_delta, ctrl.max_difficulty) == (0.9, 128, 4, 20)
    for plays, (low, high, successes, attempts) in STREAM:
        for difficulty, reward in plays:
            ctrl.update("Sorting", difficulty, reward)
        w = ctrl.window("Sorting")
        assert (w.low, w.high, w.successes, w.attempts) == (low, high, successes, attempts)
    windows = []
    for _ in range(6, 25):  # always solved: promoted each tau_num plays, capped at 20
        for _ in range(128):
            ctrl.update("Sorting", ctrl.window("Sorting").high, 1.0)
        windows.append((ctrl.window("Sorting").low, ctrl.window("Sorting").high))
    assert windows == [(lo, lo + 3) for lo in range(4, 18)] + [(17, 20)] * 5
    # a positive reward below 1 counts as a success, as upstream's ``reward > 0``
    fresh = _controller(name)
    for r in [0.5] * 116 + [-1.0] * 12:
        fresh.update("SAT", 0, r)
    assert fresh.window("SAT").high == 1


def test_difficulties_are_drawn_uniformly_from_the_window() -> None:
    ctrl = _controller()
    w = ctrl.window("Sorting")
    w.low, w.high = 3, 6
    rng = random.Random(0)
    drawn = [ctrl.sample("Sorting", rng) for _ in range(4000)]
    assert set(drawn) == {3, 4, 5, 6}
    for d in range(3, 7):  # upstream: random.randint(low, high)
        assert 0.22 < drawn.count(d) / len(drawn) < 0.28


def test_a_difficulty_is_rlves_parameter_controller_advanced_that_many_times() -> None:
    pytest.importorskip("Gym.parameter_controllers")
    import spade_envs as se
    from Gym.parameter_controllers import identifier2controller

    # upstream: a fresh ParameterController, update() `difficulty` times, one of its parameters
    for name in se.resolve_rlve_env_set("official16"):
        for d in (0, 1, 3):
            ctl = identifier2controller[name]()
            for _ in range(d):
                ctl.update()
            choices = ctl.get_parameter_list()
            assert se.rlve_parameter_for(name, d, random.Random(d)) in choices
    assert se.rlve_parameter_for("Division", 2, random.Random(0)) == {
        "divisor_digit_num": 3,
        "answer_digit_num": 3,
    }


def test_official16_is_the_launchers_environment_set() -> None:
    pytest.importorskip("Gym.parameter_controllers")
    import spade_envs as se

    assert se.resolve_rlve_env_set(load_recipe("fixed-rlve-4b").rlve.envs) == [
        "Division", "EuclidGame", "GCDOne_Counting", "HamiltonianPath", "LampChanging",
        "LargestConvexPolygon", "Multiplication", "PCPPermutation", "Path_NoGoingBack_Counting",
        "SAT", "ShortestPath", "Sorting", "SpiralMatrix", "SubsequenceReversalLNDS",
        "UndamagedSubmatrixCounting", "WYRLevelingGround",
    ]  # fmt: skip


# -- grounding: one SPICE document per designer prompt ------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [("spade-games-4b", 6000), ("spade-games-30b", 6000), ("spade-tool-use-8b", 4000)],
)
def test_the_designer_sees_one_document_cut_at_the_launchers_budget(name, words, tmp_path):
    import json

    import spade_corpus as sc
    from spade_train.resources import grounding_sampler
    from spade_train.steps.design import designer_prompts

    body = " ".join(f"w{i}" for i in range(words + 500))
    corpus = tmp_path / "spice.jsonl"
    corpus.write_text(
        "garbage line\n" + json.dumps({"orig_doc": body, "text": "chunk only"}) + "\n"
    )
    cfg = load_recipe(name, [f"designer.grounding.corpus_file={corpus}"])
    assert (cfg.designer.grounding.mode, cfg.designer.grounding.max_words) == ("document", words)
    prompts, _skills = designer_prompts(cfg, 1, sc.EnvironmentMemory(), grounding_sampler(cfg))
    for messages in prompts:
        user = messages[-1]["content"]
        assert user.count("<reference_document>") == 1  # one document, not snippets
        shown = user.split("<reference_document>\n", 1)[1].split("\n</reference_document>")[0]
        text, marker = shown.rsplit("\n", 1)
        assert text.split(" ") == body.split()[:words]  # the whole budget, not 400 characters
        assert marker == f"[... the document is cut here, after {words} words]"
        assert "chunk only" not in user  # orig_doc before text


def test_tinker_has_no_corpus_grounding_or_memory() -> None:
    for name in TINKER:
        d = load_recipe(name).designer
        assert not d.grounding.enabled and not d.memory.enabled
