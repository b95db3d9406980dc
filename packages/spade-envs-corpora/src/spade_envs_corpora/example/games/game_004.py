"""Code breaker: deduce a hidden digit code from exact/partial match feedback (Mastermind)."""

import random
import re
from collections import Counter

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def score(secret: str, guess: str) -> tuple[int, int]:
    """(digits right and in the right place, digits right but in the wrong place)."""
    exact = sum(s == g for s, g in zip(secret, guess, strict=True))
    common = sum((Counter(secret) & Counter(guess)).values())
    return exact, common - exact


class CodeBreakerEnv:
    """Multi-turn: each guess of the code is answered with exact and partial match counts."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, length: int = 4, num_digits: int = 6, **kwargs):
        self.max_turns = max_turns
        self.length = length
        self.num_digits = max(2, min(num_digits, 9))
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        digits = "123456789"[: self.num_digits]
        self._secret = "".join(rng.choice(digits) for _ in range(self.length))
        opening = self._secret
        while opening == self._secret:  # a free first clue that is not the code itself
            opening = "".join(rng.choice(digits) for _ in range(self.length))
        exact, partial = score(self._secret, opening)
        self._turn = 0
        self._done = False
        observation = (
            f"I have chosen a secret code of {self.length} digits, each from 1 to "
            f"{self.num_digits}; digits may repeat. Guess it by answering \\boxed{{...}} with "
            f"{self.length} digits, for example \\boxed{{{digits[0] * self.length}}}. After each "
            "guess I say how many digits are right and in the right place (exact) and how many "
            "more are right but in the wrong place (partial). Guessing the code wins. You have "
            f"{self.max_turns} guesses. To start you off: {opening} would score exact {exact}, "
            f"partial {partial}."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        guess = re.sub(r"[\s,]", "", _last_boxed(action) or "")
        reward, terminated = 0.0, False
        if not re.fullmatch(f"[1-{self.num_digits}]{{{self.length}}}", guess):
            observation = (
                f"Answer with exactly {self.length} digits from 1 to {self.num_digits} inside "
                "\\boxed{...}."
            )
        elif guess == self._secret:
            observation, reward, terminated = f"{guess}: cracked!", 1.0, True
        else:
            exact, partial = score(self._secret, guess)
            observation = f"{guess}: exact {exact}, partial {partial}."
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += f" Out of guesses; the code was {self._secret}."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return f"\\boxed{{{self._secret}}}"

    def close(self) -> None:
        self._done = True
