"""Egyptian fractions: take a fraction down to zero by subtracting distinct unit fractions."""

import random
import re
from fractions import Fraction

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_UNIT = re.compile(r"(?:1\s*/\s*)?(\d{1,12})")
_MAX_DENOMINATOR = 10**9


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _greedy(value):
    """Denominators of the greedy (Fibonacci-Sylvester) expansion of a fraction in (0, 1)."""
    denominators = []
    while value > 0:
        n = -(-value.denominator // value.numerator)
        denominators.append(n)
        value -= Fraction(1, n)
    return denominators


class EgyptianFractionEnv:
    """Multi-turn state game: each move subtracts 1/n (n not used before, 1/n not above what
    is left); reaching exactly zero wins."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"egyptian-fractions:{seed}")
        while True:
            q = rng.randint(30, 400)
            p = rng.randint(3, q - 1)
            start = Fraction(p, q)
            if start.numerator < 3:
                continue
            steps = _greedy(start)
            if 3 <= len(steps) <= 5 and max(steps) <= 10**6:
                break
        self._start, self._left, self._steps = start, start, steps
        self._used = []
        self._turn = 0
        self._done = False
        observation = (
            f"You hold the fraction {start}. Each turn subtract one unit fraction 1/n by "
            "answering \\boxed{1/n}, for example \\boxed{1/7}. Every n must be a whole number of "
            "at least 2 that you have not used before, and 1/n may not be larger than what is "
            "left; a move that breaks these rules is refused. You win when exactly 0 is left. "
            f"You have {self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        move = _UNIT.fullmatch(content)
        reward, terminated = 0.0, False
        if move and 2 <= int(move.group(1)) <= _MAX_DENOMINATOR:
            n = int(move.group(1))
            if n in self._used:
                observation = f"1/{n} was used already. Left: {self._left}."
            elif Fraction(1, n) > self._left:
                observation = f"1/{n} is larger than what is left, {self._left}."
            else:
                self._used.append(n)
                self._left -= Fraction(1, n)
                if self._left == 0:
                    observation = f"Subtracted 1/{n}: exactly 0 is left. You win!"
                    reward, terminated = 1.0, True
                else:
                    observation = f"Subtracted 1/{n}. Left: {self._left}."
        else:
            observation = (
                f"Answer \\boxed{{1/n}} with a whole number n from 2 to {_MAX_DENOMINATOR}. "
                f"Left: {self._left}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "left": str(self._left), "used": list(self._used)}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{1/{n}}}" for n in self._steps)

    def close(self) -> None:
        self._done = True
