"""Hidden formula: learn a two-variable polynomial from small queries and evaluate it far away."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_QUERY_LIMIT = 5
# Monomials x^i * y^j of total degree at most 2; the hidden formula uses four of them.
_TERMS = [(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class HiddenFormulaEnv:
    """Multi-turn: evaluate f at small points, then give f at a large point."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def _f(self, x, y):
        return sum(c * x**i * y**j for (i, j), c in self._coefficients.items())

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        terms = rng.sample(_TERMS, 4)
        self._coefficients = {
            term: rng.choice([-1, 1]) * rng.randint(1, 6) for term in sorted(terms)
        }
        self._x, self._y = rng.randint(12, 40), rng.randint(12, 40)
        self._answer = self._f(self._x, self._y)
        self._turn = 0
        self._wrong = 0
        self._done = False
        observation = (
            "A hidden formula f(x, y) is a sum of at most six terms, each an integer coefficient "
            "times one of 1, x, y, x^2, x*y, y^2 (some coefficients may be zero).\n"
            f"Each turn you may evaluate it at one point with 0 <= x, y <= {_QUERY_LIMIT} by "
            "answering for example \\boxed{f(2, 3)}.\n"
            f"Goal: give f({self._x}, {self._y}) by answering \\boxed{{answer N}}. You have "
            f"{self.max_answers} answers and {self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").lower()
        query = re.fullmatch(r"f?\s*\(?\s*(-?\d+)\s*,\s*(-?\d+)\s*\)?", content)
        answer = re.fullmatch(r"answer\s*:?\s*(-?\d+)", content)
        reward, terminated = 0.0, False
        if query:
            x, y = int(query.group(1)), int(query.group(2))
            if 0 <= x <= _QUERY_LIMIT and 0 <= y <= _QUERY_LIMIT:
                observation = f"f({x}, {y}) = {self._f(x, y)}."
            else:
                observation = (
                    f"Both x and y must be from 0 to {_QUERY_LIMIT}, e.g. \\boxed{{f(2, 3)}}."
                )
        elif answer and len(answer.group(1)) <= 12:
            if int(answer.group(1)) == self._answer:
                observation, reward, terminated = "Correct!", 1.0, True
            else:
                self._wrong += 1
                left = self.max_answers - self._wrong
                terminated = left <= 0
                observation = f"{answer.group(1)} is wrong. " + (
                    "No answers left." if terminated else f"{left} answer(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{f(x, y)} to evaluate the formula, or \\boxed{answer N} to give "
                f"f({self._x}, {self._y})."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        points = [(0, 0), (1, 0), (2, 0), (0, 1), (0, 2), (1, 1)]
        lines = [f"\\boxed{{f({x}, {y})}}" for x, y in points]
        return "\n".join(lines + [f"\\boxed{{answer {self._answer}}}"])

    def close(self) -> None:
        self._done = True
