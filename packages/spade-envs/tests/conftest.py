"""Shared fixtures: one small, known-good environment written to the contract."""

from __future__ import annotations

import pytest
import spade_envs as se

GUESS_SOURCE = '''
import random
import re


class GuessEnv:
    """Guess a hidden number in 1..50 with higher/lower feedback."""

    skill = "Math"

    def __init__(self, max_turns=10, high=50, **kwargs):
        self.max_turns = max_turns
        self.high = high

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.secret = self.rng.randint(1, self.high)
        self.turn = 0
        self.done = False
        return (f"Guess my number between 1 and {self.high}. You have {self.max_turns} turns. "
                "Answer as \\\\boxed{n}."), {"turn": 0}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\\\boxed\\{\\s*(-?\\d+)\\s*\\}", action)
        if not found:
            obs, reward, term = "Write your guess as \\\\boxed{n}.", 0.0, False
        else:
            guess = int(found[-1])
            if guess == self.secret:
                obs, reward, term = "Correct!", 1.0, True
            else:
                obs = "Higher." if guess < self.secret else "Lower."
                reward, term = 0.0, False
        trunc = not term and self.turn >= self.max_turns
        self.done = term or trunc
        return obs, reward, term, trunc, {"turn": self.turn}

    def solution(self):
        return f"\\\\boxed{{{self.secret}}}"

    def close(self):
        pass
'''

GUESS_HINT = "Binary search: guess the middle of the remaining range."


@pytest.fixture
def guess_source() -> str:
    return GUESS_SOURCE


@pytest.fixture
def guess_factory():
    return se.load_env(GUESS_SOURCE)


def broken(body_replacements: dict[str, str]) -> str:
    """GUESS_SOURCE with some lines replaced, for checker failure cases."""
    source = GUESS_SOURCE
    for old, new in body_replacements.items():
        assert old in source, old
        source = source.replace(old, new)
    return source
