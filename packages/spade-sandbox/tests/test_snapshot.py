"""SandboxedEnv.snapshot / restore: an episode started from a copy of a reset's state plays
exactly as one started by the reset itself; state the worker cannot copy without running the
environment's code is refused (the caller resets for real) and that code never runs."""

from __future__ import annotations

import pytest
from conftest import GAME, make_env_source
from spade_sandbox import open_env

pytestmark = pytest.mark.timeout(60)

ACTIONS = ["\\boxed{3}", "\\boxed{7}", "5", "\\boxed{1}", "\\boxed{9}"]


def play(env, actions=ACTIONS):
    out = []
    for action in actions:
        out.append(env.step(action))
        if out[-1][2] or out[-1][3]:
            break
    return out


def test_a_restored_episode_plays_like_a_reset_one(config):
    with open_env(GAME, config=config) as env:
        first = env.reset(seed=4)
        assert env.snapshot("4")
        kept = play(env)
        for _ in range(3):
            assert env.restore("4")
            assert play(env) == kept
            assert env.call("solution") == env.call("solution")
        assert env.reset(seed=4) == first and play(env) == kept
        assert env.episodes == 5


def test_unknown_key_and_wrong_moment(config):
    with open_env(GAME, config=config) as env:
        with pytest.raises(ValueError, match="after reset"):
            env.snapshot("0")
        env.reset(seed=0)
        assert not env.restore("0")
        env.step("1")
        with pytest.raises(ValueError, match="after reset"):
            env.snapshot("0")
        with pytest.raises(TypeError):
            env.restore(0)  # type: ignore[arg-type]


def test_globals_class_data_and_the_random_module_are_restored(config):
    source = make_env_source(
        header="import random\nLOG = []",
        init="self.max_turns = max_turns",
        reset="""
        random.seed(seed)
        LOG.clear()
        type(self).history.clear()
        self.turn = 0
        return "start", {}
        """,
        step="""
        self.turn += 1
        LOG.append(action)
        type(self).history.append(action)
        roll = random.randint(0, 10**9)
        return f"{roll} {len(LOG)} {len(self.history)}", 0.0, self.turn >= 3, False, {}
        """,
        extra="history = []\n",
    )
    with open_env(source, config=config) as env:
        env.reset(seed=1)
        assert env.snapshot("1")
        kept = play(env, ["a", "b", "c"])
        assert [obs.split()[1:] for obs, *_ in kept] == [["1", "1"], ["2", "2"], ["3", "3"]]
        assert env.restore("1") and play(env, ["a", "b", "c"]) == kept


@pytest.mark.parametrize(
    "field",
    [
        "(x for x in range(3))",  # a generator
        "Hooked()",  # an instance whose class defines __deepcopy__
        "{Hooked(): 1}",  # a key whose hash is the environment's code
        "Slotted()",
        "(lambda box: lambda: box)([0])",  # a closure over a list
        "random.Random(seed).choice",  # a builtin bound to a generator
        "lambda acc=[]: acc",  # a mutable default
    ],
)
def test_state_it_cannot_copy_is_refused_and_no_hook_runs(config, field):
    source = make_env_source(
        header="""
        import random


        class Hooked:
            def __deepcopy__(self, memo):
                raise SystemExit("the environment's copy hook ran")

            def __reduce_ex__(self, protocol):
                raise SystemExit("the environment's reduce hook ran")

            def __hash__(self):
                return 1


        class Slotted:
            __slots__ = ("a",)
        """,
        reset=f"self.field = {field}\nreturn 'start', {{}}",
        step="return 'obs', 0.0, True, False, {}",
    )
    with open_env(source, config=config) as env:
        env.reset(seed=0)
        assert not env.snapshot("0")
        assert not env.restore("0")
        assert env.step("x")[2] is True  # the worker lives on


def test_the_usual_kinds_of_state_are_copied(config):
    source = make_env_source(
        header="""
        import collections
        import fractions
        import random


        def score(cells):
            return sum(cells)


        class Cell:
            def __init__(self, value):
                self.value = value
        """,
        reset="""
        rng = random.Random(seed)
        self.cells = [Cell(rng.randint(0, 9)) for _ in range(4)]
        self.first = self.cells[0]
        self.queue = collections.deque(range(3), maxlen=5)
        self.counts = collections.Counter("abca")
        self.by_key = collections.defaultdict(list, {(1, "x"): [1]})
        self.seen = {1, 2}
        self.frozen = frozenset({"a"})
        self.half = fractions.Fraction(1, 2)
        self.scorer = score
        self.act = self.step
        self.turn = 0
        return "start", {}
        """,
        step="""
        self.turn += 1
        self.first.value += 1
        self.queue.append(self.turn)
        self.counts[action] += 1
        self.by_key[(1, "x")].append(self.turn)
        self.seen.add(self.turn * 10)
        values = [c.value for c in self.cells]
        text = f"{values} {list(self.queue)} {self.counts[action]} {self.by_key[(1, 'x')]} {sorted(self.seen)} {self.half}"
        return text, 0.0, self.turn >= 3, False, {}
        """,
    )
    with open_env(source, config=config) as env:
        env.reset(seed=5)
        assert env.snapshot("5")
        kept = play(env, ["a", "b", "a"])
        assert env.restore("5") and play(env, ["a", "b", "a"]) == kept
        assert env.reset(seed=5) and play(env, ["a", "b", "a"]) == kept
