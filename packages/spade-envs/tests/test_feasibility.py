"""Feasibility without privilege (issue 40, item 5): the indistinguishable-twins check.

A game whose answer is drawn in reset after the question, never shown and never narrowed by
the replies is rejected ``infeasible``; a hidden secret that the replies narrow (higher/lower)
is accepted; randomness the analysis cannot trace is recorded as not judged; a hostile twin
gets a typed outcome, in process and in the sandbox."""

from __future__ import annotations

import pytest
import spade_envs as se
from spade_envs.feasibility import FEASIBILITY_SEEDS, twins_of

# The analysis itself (spade_sandbox.analyse_twins) is standard-library code of spade-sandbox's
# worker; in process it is imported from there.
ss = pytest.importorskip(
    "spade_sandbox", reason="the sandbox extra (spade-sandbox) is not installed"
)

SEEDS = se.draw_seeds(7, 5)

_GAME = '''
import re
{imports}


class {name}Env:
    """A number game."""

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self._secret = 0
        self._turn = 0
        self._done = True

    def reset(self, seed=None):
        rng = {rng}(seed)
        low = rng.randint(1, 60)
        self._range = (low, low + 63)
        self._secret = {secret}
        self._turn = 0
        self._done = False
        return (
            f"I picked a whole number from {{low}} to {{low + 63}}. Guess it in \\\\boxed{{{{n}}}}.",
            {{}},
        )

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {{}}
        self._turn += 1
        found = re.findall(r"\\\\boxed\\{{(-?\\d+)\\}}", action)
        if found and int(found[-1]) == self._secret:
            self._done = True
            return "Correct!", 1.0, True, False, {{}}
        if not found:
            reply = "Reply with \\\\boxed{{n}}."
        else:
            reply = {reply}
        truncated = self._turn >= self.max_turns
        self._done = truncated
        return reply, 0.0, False, truncated, {{}}

    def solution(self):
        return f"\\\\boxed{{{{{{self._secret}}}}}}"

    def close(self):
        pass
'''


def game(name: str, *, secret: str, reply: str, imports: str = "import random",
         rng: str = "random.Random") -> str:  # fmt: skip
    return _GAME.format(name=name, imports=imports, rng=rng, secret=secret, reply=reply)


#: Higher/lower: the secret is drawn last in reset and never shown, but every reply narrows it.
HIGHER_LOWER = game(
    "HigherLower",
    secret="rng.randint(*self._range)",
    reply='"Higher." if int(found[-1]) < self._secret else "Lower."',
)
#: A ticket drawn after the question from a million, with replies that say only "no".
TICKET = game(
    "Ticket",
    secret="rng.randrange(10**6)",
    reply='"No, that is not the ticket."',
    imports="from random import Random",
    rng="Random",
)
#: A sum built from the seed by arithmetic: reset draws nothing from ``random``.
ARITHMETIC = """
import re


class ArithmeticEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self._answer = 0
        self._turn = 0

    def reset(self, seed=None):
        a, b = (seed or 0) % 97 + 3, (seed or 0) // 97 % 89 + 5
        self._answer, self._turn, self._done = a + b, 0, False
        return f"What is {a} + {b}? Reply with \\\\boxed{{n}}.", {}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._turn += 1
        found = re.findall(r"\\\\boxed\\{(-?\\d+)\\}", action)
        self._done = bool(found and int(found[-1]) == self._answer)
        if self._done:
            return "Correct!", 1.0, True, False, {}
        self._done = self._turn >= self.max_turns
        return "Not right.", 0.0, False, self._done, {}

    def solution(self):
        return f"\\\\boxed{{{self._answer}}}"

    def close(self):
        pass
"""


def test_a_hidden_secret_the_replies_narrow_is_accepted() -> None:
    report = se.check_env(se.load_env(HIGHER_LOWER), seeds=SEEDS)
    assert report.feasible_bound == 1.0
    assert report.privileged_only_seeds == 0
    assert report.feasibility_seeds == 3  # three clean seeds of five settle the verdict


def test_a_hidden_answer_no_reply_narrows_is_infeasible_in_process() -> None:
    with pytest.raises(se.ContractError) as err:
        se.check_env(se.load_env(TICKET), seeds=SEEDS)
    assert err.value.code == "infeasible"
    assert "solution() wins" in err.value.message and "\n" not in err.value.message
    assert err.value.evidence is not None and "not the ticket" in err.value.evidence.excerpt


def test_the_twins_of_a_hidden_answer_bound_an_observation_only_agent() -> None:
    cls = se.load_env(TICKET)
    result = twins_of(None, lambda: cls(max_turns=10), SEEDS[0], 10, ["\\boxed{0}"])
    assert result["outcome"] == "judged" and result["distinguished"] is False
    assert result["hidden"] >= 1 and result["bound"] < 0.5
    narrowed = se.load_env(HIGHER_LOWER)
    result = twins_of(None, lambda: narrowed(max_turns=10), SEEDS[0], 10, [])
    assert result["distinguished"] is True and result["bound"] == 1.0


def test_a_reset_without_python_random_draws_is_recorded_as_not_judged() -> None:
    report = se.check_env(se.load_env(ARITHMETIC), seeds=SEEDS)
    assert report.feasible_bound is None and report.feasibility_seeds == 0
    assert report.feasibility_not_judged == {"untraced": len(SEEDS)}


_RAISES = HIGHER_LOWER.replace(
    "        self._secret = rng.randint(*self._range)\n",
    "        self._secret = rng.randint(*self._range)\n"
    "        type(self).resets = getattr(type(self), 'resets', 0) + 1\n"
    "        if type(self).resets > 2:\n"
    "            raise RuntimeError('no twins here')\n",
)


def test_a_twin_that_raises_is_a_typed_outcome_in_process() -> None:
    cls = se.load_env(_RAISES)
    result = twins_of(None, lambda: cls(max_turns=10), 5, 10, [])
    assert result["outcome"] == "raised" and "no twins here" in result["message"]


def test_seeds_are_added_only_where_some_seed_is_privileged_only() -> None:
    honest = se.check_env(se.load_env(HIGHER_LOWER), seeds=SEEDS[:3])
    assert honest.feasibility_seeds == 2
    with pytest.raises(se.ContractError) as err:
        se.check_env(se.load_env(TICKET), seeds=SEEDS[:3])
    # Every seed is privileged-only: decided once more than half of FEASIBILITY_SEEDS are.
    assert f"on {FEASIBILITY_SEEDS // 2 + 1} of {FEASIBILITY_SEEDS // 2 + 1} seeds" in str(
        err.value
    )


_LOOPS = HIGHER_LOWER.replace(
    "        low = rng.randint(1, 60)\n",
    "        low = rng.randint(1, 60)\n"
    "        while len(type(rng).__mro__) > 3:  # a traced generator: hang the analysis\n"
    "            pass\n",
)


@pytest.fixture(scope="module")
def config():
    return ss.SandboxConfig(limits=ss.Limits(call_wall_s=1.0))


def test_the_sandboxed_path_rejects_and_accepts_as_in_process(config) -> None:
    with pytest.raises(se.ContractError) as err:
        se.check_env(se.load_env(TICKET, sandbox=True, sandbox_config=config), seeds=SEEDS)
    assert err.value.code == "infeasible" and err.value.__cause__ is None
    assert "solution() wins" in err.value.message
    report = se.check_env(
        se.load_env(HIGHER_LOWER, sandbox=True, sandbox_config=config), seeds=SEEDS
    )
    assert report.feasible_bound == 1.0 and report.privileged_only_seeds == 0


def test_a_twin_that_raises_in_the_worker_is_a_typed_outcome(config) -> None:
    with ss.open_env(_RAISES, kwargs={"max_turns": 10}, config=config) as env:
        env.reset(5)
        result = env.twins(5, 10, ["\\boxed{1}"])
        assert result["outcome"] == "raised" and "no twins here" in result["message"]
        assert env.step("\\boxed{1}")[1] == 0.0  # the environment's own episode goes on


def test_a_twin_that_loops_is_stopped_and_typed(config) -> None:
    with ss.open_env(_LOOPS, kwargs={"max_turns": 10}, config=config) as env:
        assert env.reset(5)[0].startswith("I picked")
        with pytest.raises(ss.SandboxTimeout):
            env.twins(5, 10)
        assert env.reset(6)[0].startswith("I picked")  # a fresh worker serves the next episode
    factory = se.load_env(_LOOPS, sandbox=True, sandbox_config=config)
    with pytest.raises(se.ContractError) as err:
        se.check_env(factory, seeds=SEEDS[:2])
    assert err.value.code == "infeasible" and isinstance(err.value.__cause__, ss.SandboxTimeout)


# The designer's slip a helper found: an f-string without its ``f`` asks about numbers the
# agent never sees, and the first boxed answer ends the episode, so one guess is all it gets.
UNSHOWN_OPERANDS = '''
import random
import re


class MathPuzzleEnv:
    """Add two numbers."""

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.answer = ""
        self._turn = 0
        self._done = True

    def reset(self, seed=None):
        rng = random.Random(seed)
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        self.answer = str(a + b)
        self._turn = 0
        self._done = False
        return "What is {a} plus {b}? Answer in \\\\boxed{}.", {}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._turn += 1
        found = re.findall(r"\\\\boxed\\{([^{}]*)\\}", action)
        if found:
            self._done = True
            won = found[-1].strip() == self.answer
            return ("Correct!" if won else "Wrong."), (1.0 if won else 0.0), True, False, {}
        truncated = self._turn >= self.max_turns
        self._done = truncated
        return "Answer in \\\\boxed{}.", 0.0, False, truncated, {}

    def solution(self):
        return f"\\\\boxed{{{self.answer}}}"

    def close(self):
        pass
'''


def test_one_guess_at_numbers_never_shown_is_infeasible() -> None:
    # Sums of two numbers repeat, so ten guesses would cover most twins; but a wrong answer
    # ends the episode: the bound counts the guesses the game allows, not max_turns.
    with pytest.raises(se.ContractError) as caught:
        se.check_env(se.load_env(UNSHOWN_OPERANDS), seeds=SEEDS)
    assert caught.value.code == "infeasible", caught.value.message
