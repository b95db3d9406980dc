"""Modular arithmetic chain: apply a list of operations to a start value modulo a prime."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
# Primes between 500 and 1000: large enough that guessing a residue is hopeless.
_PRIMES = [p for p in range(503, 1000, 2) if all(p % d for d in range(3, int(p**0.5) + 1, 2))]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class ModularChainEnv:
    """Single answer with retries: the value of a chain of modular operations."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, num_ops: int = 6, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.num_ops = num_ops
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        p = rng.choice(_PRIMES)
        value = start = rng.randrange(2, p)
        lines = []
        for number in range(1, self.num_ops + 1):
            kind = rng.choice(["add", "sub", "mul", "pow", "inv"])
            if kind == "add":
                k = rng.randrange(10, p)
                value = (value + k) % p
                lines.append(f"{number}. add {k}")
            elif kind == "sub":
                k = rng.randrange(10, p)
                value = (value - k) % p
                lines.append(f"{number}. subtract {k}")
            elif kind == "mul":
                k = rng.randrange(2, 100)
                value = value * k % p
                lines.append(f"{number}. multiply by {k}")
            elif kind == "pow":
                e = rng.randrange(2, 6)
                value = pow(value, e, p)
                lines.append(f"{number}. raise to the power {e}")
            else:
                k = rng.randrange(2, 50)
                value = value * pow(k, -1, p) % p
                lines.append(f"{number}. divide by {k} (multiply by the inverse of {k} mod {p})")
        self._p = p
        self._answer = value
        self._turn = 0
        self._attempts = 0
        self._done = False
        observation = (
            f"Start with x = {start}. Working modulo the prime p = {p}, apply these operations in "
            "order, reducing modulo p after each one:\n" + "\n".join(lines) + "\n\n"
            f"What is the final value of x, as an integer from 0 to {p - 1}? Answer as \\boxed{{N}}. "
            f"You have {self.max_attempts} attempts within {self.max_turns} turns; a wrong answer "
            "is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action)
        reward, terminated = 0.0, False
        if content is None or not re.fullmatch(r"-?\d+", content):
            observation = "Give one integer inside \\boxed{...}, for example \\boxed{123}."
        elif int(content) % self._p == self._answer:
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
