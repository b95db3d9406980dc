"""Sequence continuation: give the next term of an integer sequence built by a hidden rule."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SHOWN_TERMS = 7


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _quadratic(rng):
    a, b, c = rng.randrange(1, 6), rng.randrange(-9, 10), rng.randrange(-20, 21)
    return [a * n * n + b * n + c for n in range(1, _SHOWN_TERMS + 2)]


def _fibonacci_like(rng):
    terms = [rng.randrange(1, 10), rng.randrange(1, 10)]
    extra = rng.randrange(0, 4)
    while len(terms) < _SHOWN_TERMS + 1:
        terms.append(terms[-1] + terms[-2] + extra)
    return terms


def _affine_recurrence(rng):
    ratio, shift = rng.choice([2, 3, -2]), rng.randrange(-5, 6)
    terms = [rng.randrange(1, 8)]
    while len(terms) < _SHOWN_TERMS + 1:
        terms.append(ratio * terms[-1] + shift)
    return terms


def _interleaved(rng):
    first, step_a = rng.randrange(1, 30), rng.randrange(2, 12)
    second, step_b = rng.randrange(30, 90), rng.randrange(-9, -1)
    return [
        first + step_a * (i // 2) if i % 2 == 0 else second + step_b * (i // 2)
        for i in range(_SHOWN_TERMS + 1)
    ]


def _alternating_operations(rng):
    add, times = rng.randrange(1, 10), rng.randrange(2, 4)
    terms = [rng.randrange(1, 6)]
    while len(terms) < _SHOWN_TERMS + 1:
        terms.append(terms[-1] + add if len(terms) % 2 == 1 else terms[-1] * times)
    return terms


def _growing_differences(rng):
    terms, difference = [rng.randrange(0, 20)], rng.randrange(1, 5)
    ratio = rng.choice([2, 3])
    while len(terms) < _SHOWN_TERMS + 1:
        terms.append(terms[-1] + difference)
        difference *= ratio
    return terms


_RULES = [
    _quadratic,
    _fibonacci_like,
    _affine_recurrence,
    _interleaved,
    _alternating_operations,
    _growing_differences,
]


class SequenceNextEnv:
    """Single answer with retries: the next term of a sequence."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        terms = rng.choice(_RULES)(rng)
        self._answer = terms[-1]
        self._turn = 0
        self._attempts = 0
        self._done = False
        shown = ", ".join(str(t) for t in terms[:-1])
        observation = (
            f"These are the first {_SHOWN_TERMS} terms of an integer sequence that follows one "
            f"simple rule:\n{shown}, ...\nWhat is the next term? Answer as \\boxed{{N}}. You have "
            f"{self.max_attempts} attempts within {self.max_turns} turns; a wrong answer is only "
            "marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").replace(",", "")
        reward, terminated = 0.0, False
        if not re.fullmatch(r"-?\d+", content):
            observation = "Give one integer inside \\boxed{...}, for example \\boxed{-17}."
        elif int(content) == self._answer:
            observation, reward, terminated = "Correct!", 1.0, True
        else:
            self._attempts += 1
            left = self.max_attempts - self._attempts
            terminated = left <= 0
            observation = f"{content} is wrong. " + (
                "No attempts left." if terminated else f"{left} attempt(s) left."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return f"\\boxed{{{self._answer}}}"

    def close(self) -> None:
        self._done = True
