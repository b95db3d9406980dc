"""Smooth number hunt: find a hidden number built from small primes with gcd queries."""

import math
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_GCD = re.compile(r"gcd\s*\(?\s*(?:n\s*,\s*)?(\d+)\s*\)?", re.IGNORECASE)
_PRIMES = [2, 3, 5, 7, 11, 13]
# Largest exponent of each prime; every prime power p**cap stays at most 1000.
_CAPS = [9, 6, 4, 3, 2, 2]
_LOW, _HIGH = 1000, 1_000_000


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class SmoothGcdEnv:
    """Multi-turn: each query reports gcd(N, q) for a chosen q up to 1000; then name N."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"smooth-gcd:{seed}")
        while True:
            exponents = [min(cap, int(rng.expovariate(0.6))) for cap in _CAPS]
            number = math.prod(p**e for p, e in zip(_PRIMES, exponents, strict=True))
            if _LOW <= number <= _HIGH and sum(1 for e in exponents if e) >= 3:
                break
        self._number = number
        divisors = math.prod(e + 1 for e in exponents)
        self._turn = 0
        self._attempts = 0
        self._done = False
        observation = (
            f"A hidden number N between {_LOW} and {_HIGH} has no prime factor larger than 13 "
            f"(each prime p appears at most as often as keeps p^k <= 1000). N has {divisors} "
            f"divisors and its last two digits are {number % 100:02d}.\n"
            "Each turn you may ask for the greatest common divisor of N and a number q from 2 "
            "to 1000 by answering \\boxed{gcd 360} (any such q), or name N as \\boxed{N}, for "
            f"example \\boxed{{123456}}. You have {self.max_attempts} attempts at N within "
            f"{self.max_turns} turns; a wrong N is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        query = _GCD.fullmatch(content)
        reward, terminated = 0.0, False
        format_help = (
            "Answer \\boxed{gcd q} with 2 <= q <= 1000 to ask for gcd(N, q), or \\boxed{N} "
            "with your value of N."
        )
        if query:
            q = int(query.group(1))
            if 2 <= q <= 1000:
                observation = f"gcd(N, {q}) = {math.gcd(self._number, q)}."
            else:
                observation = f"q = {q} is outside 2..1000. " + format_help
        elif re.fullmatch(r"\d+", content):
            if int(content) == self._number:
                observation, reward, terminated = f"Correct, N = {self._number}!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"{content} is not N. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        else:
            observation = format_help
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        queries = [p**cap for p, cap in zip(_PRIMES, _CAPS, strict=True)]
        lines = [f"\\boxed{{gcd {q}}}" for q in queries]
        return "\n".join(lines + [f"\\boxed{{{self._number}}}"])

    def close(self) -> None:
        self._done = True
