"""RLVE (``rlve-gym``) environments through the SPADE chat runner.

Every official16 environment plays a seeded episode: its reference answer scores 1, a wrong
answer less. The tests skip, saying so, where the ``rlve`` extra is not installed.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest
import spade_envs as se
from spade_envs.rlve import (
    OFFICIAL16,
    RlveFactory,
    boxed_answer,
    parameter_for,
    reference_answer,
    resolve_env_set,
    rlve_env_ids,
    same_problem,
)

pytest.importorskip("Gym.environments", reason="rlve-gym is not installed (spade-envs[rlve])")


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # upstream's parsing cases (tests/test_game_utils.py)
        (r"answer: \boxed{42}", "42"),
        (r"answer: \boxed{{42}}", "42"),
        (r"answer: \boxed{{{x + 1}}}", "x + 1"),
        (r"answer: \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        ("no answer", None),
        ("", None),
        (r"\boxed{1} then \boxed{2}", "1"),  # the first simple box, as upstream
    ],
)
def test_boxed_answer_matches_upstream(text, expected):
    assert boxed_answer(text) == expected


def test_module_imports_without_loading_rlve():
    code = "import sys, spade_envs.rlve; print('Gym' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_env_sets():
    assert resolve_env_set("official16") == list(OFFICIAL16) and len(OFFICIAL16) == 16
    everything = resolve_env_set("all")
    assert len(everything) == 400 and set(OFFICIAL16) <= set(everything)
    assert resolve_env_set(["Sorting", "SAT"]) == ["Sorting", "SAT"]
    with pytest.raises(se.SourceError, match="unknown RLVE environment.*Nope"):
        resolve_env_set(["Sorting", "Nope"])
    with pytest.raises(se.SourceError, match="official16, all"):
        resolve_env_set("official17")
    assert rlve_env_ids() == everything


def test_difficulty_comes_from_the_parameter_controller():
    # Division's controller starts at one digit and adds one per update()
    for d in range(4):
        p = parameter_for("Division", d, random.Random(0))
        assert p == {"divisor_digit_num": d + 1, "answer_digit_num": d + 1}
    with pytest.raises(ValueError, match="difficulty"):
        parameter_for("Division", -1, random.Random(0))


def _correct_reply(env: object) -> str:
    """The environment's reference answer; LargestConvexPolygon stores only the optimum's
    size, so a subset of that size scoring 1 is searched."""
    ref = reference_answer(env.instance)
    if env.name != "LargestConvexPolygon":
        return f"\\boxed{{{ref}}}"
    n, size = env.instance.parameter["N"], int(ref)
    for labels in itertools.combinations(range(1, n + 1), size):
        answer = " ".join(map(str, labels))
        if env.instance.scorer(f"<answer>{answer}</answer>") == 1.0:
            return f"\\boxed{{{answer}}}"
    raise AssertionError("no optimal polygon found")


@pytest.mark.parametrize("name", OFFICIAL16)
def test_official16_plays_a_seeded_episode(name):
    factory = RlveFactory(name, difficulty=1, parameter_seed=3)
    probe = factory()
    first, info = probe.reset(seed=11)
    assert info == {"difficulty": 1, "seed": 11} and first.endswith("\\boxed{...}.")
    good = _correct_reply(probe)
    parameter = probe.parameter
    again = RlveFactory(name, difficulty=1, parameter=parameter)
    for reply, expect_win in ((good, True), ("\\boxed{definitely wrong}", False)):
        spec = se.EpisodeSpec(again, seed=11, env_id=f"rlve:{name}", max_turns=1)
        result = se.run_episodes([spec], lambda chats, r=reply: [r for _ in chats])[0]
        assert result.error is None, result.error
        assert result.messages[1]["content"] == first  # the same seed, the same problem
        assert len(result.turns) == 1 and result.terminated
        if expect_win:
            assert result.episode_return == 1.0 and result.turns[0].info["rlve_score"] == 1.0
        else:
            assert result.episode_return < 1.0 and not result.turns[0].info["correct"]


def test_score_reward_and_retries():
    factory = RlveFactory("Division", difficulty=0, problem_seed=5, attempts=2, reward="score")
    env = factory()
    env.reset(seed=0)
    good = f"\\boxed{{{reference_answer(env.instance)}}}"
    assert env.step("no box at all")[1:4] == (-1.0, False, False)  # RLVE's format penalty
    obs, reward, terminated, _, info = env.step(good)
    assert (obs, reward, terminated, info["correct"]) == ("Correct!", 1.0, True, True)
    # one attempt: a wrong answer ends the episode without revealing the reference
    env = RlveFactory("Division", difficulty=0, problem_seed=5)()
    env.reset()
    obs, reward, terminated, _, _ = env.step("\\boxed{-7}")
    assert (reward, terminated) == (0.0, True) and reference_answer(env.instance) not in obs


def test_same_problem_group_ignores_the_reset_seed():
    parameter, seed = same_problem("Sorting", 2, random.Random(1))
    factory = RlveFactory("Sorting", 2, parameter=parameter, problem_seed=seed)
    prompts = {factory().reset(seed=s)[0] for s in range(4)}
    assert len(prompts) == 1
    assert factory().reset()[1]["seed"] == seed


def test_generation_leaves_global_rng_alone():
    import numpy as np
    import torch

    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    RlveFactory("SAT", 1)().reset(seed=7)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected
