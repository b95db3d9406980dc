"""The twin analysis's tracer (spade_sandbox.analyse_twins, the worker's `twins` op): every
draw through the environment module's own `random` names is taped and replayed, and the names
are put back afterwards."""

from __future__ import annotations

import random
import types

from spade_sandbox import analyse_twins
from spade_sandbox.worker_twins import Tape, instrumented

_MODULE = """
import random
from random import choice, randint, Random

_SHARED = Random(3)


class DrawsEnv:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns

    def reset(self, seed=None):
        random.seed(seed)
        rng = Random(seed)
        items = list("abcdef")
        rng.shuffle(items)
        self.draw = (
            randint(1, 9), choice("xyz"), rng.sample(range(50), 3), round(rng.uniform(0, 1), 6),
            round(rng.gauss(0, 1), 6), rng.randbytes(2).hex(), "".join(items), _SHARED.random(),
        )
        self.secret = rng.randrange(1000)
        return f"draws {self.draw[:7]}", {}

    def step(self, action):
        return "no", 0.0, False, False, {}

    def solution(self):
        return str(self.secret)
"""


def _module() -> types.ModuleType:
    module = types.ModuleType("twins_test_env")
    exec(_MODULE, module.__dict__)
    return module


def test_every_draw_is_taped_and_a_replay_reproduces_the_reset() -> None:
    module = _module()
    env, tape = module.DrawsEnv(), Tape(1)
    with instrumented([module.__dict__], tape) as found:
        assert found
        tape.record()
        first = (env.reset(seed=11)[0], env.solution())
        tape.replay(tape.draws)
        again = (env.reset(seed=11)[0], env.solution())
        tape.replay(tape.changed(len(tape.draws) - 1) or [])
        twin = (env.reset(seed=11)[0], env.solution())
    assert first == again and len(tape.draws) >= 12
    assert twin[0] == first[0] and twin[1] != first[1]  # the secret is the last draw
    assert module.random is random and module.Random is random.Random
    assert module.randint == random.randint and type(module._SHARED) is random.Random


def test_a_secret_no_reply_narrows_bounds_the_agent_below_one_half() -> None:
    result = analyse_twins(_module().DrawsEnv(), 11, ["0"], 10)
    assert result["outcome"] == "judged" and result["hidden"] >= 1
    assert result["distinguished"] is False and result["bound"] < 0.5
    assert result["evidence"].endswith("-> no")


def test_an_environment_without_random_names_is_untraced() -> None:
    class Plain:
        def reset(self, seed=None):
            return "x", {}

        def solution(self):
            return "1"

    assert analyse_twins(Plain(), 1, [], 10)["outcome"] == "untraced"
