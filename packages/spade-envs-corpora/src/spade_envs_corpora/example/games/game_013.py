"""Polynomial probe: identify a hidden integer polynomial from a few evaluation queries."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_QUERY = re.compile(r"(?:f\s*\(\s*(-?\d+)\s*\)|f\s+(-?\d+)|x\s*=\s*(-?\d+))", re.IGNORECASE)
_LIST = re.compile(r"-?\d+(?:\s*[, ]\s*-?\d+)*")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _evaluate(coefficients, x):
    value = 0
    for c in coefficients:
        value = value * x + c
    return value


class PolynomialProbeEnv:
    """Multi-turn: evaluate the hidden polynomial at chosen points, then name its coefficients."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, degree: int = 4, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.degree = max(1, degree)
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        # A seed string of its own keeps the episode independent of agents seeded alike.
        rng = random.Random(None if seed is None else f"polynomial-probe:{seed}")
        coefficients = [rng.choice([c for c in range(-9, 10) if c])]
        coefficients += [rng.randint(-9, 9) for _ in range(self.degree)]
        self._coefficients = coefficients
        free = rng.randint(6, 9)
        self._turn = 0
        self._attempts = 0
        self._done = False
        n = self.degree
        terms = " + ".join(
            f"a{k}*x^{k}" if k > 1 else ("a1*x" if k else "a0") for k in range(n, -1, -1)
        )
        observation = (
            f"A hidden polynomial f(x) = {terms} has degree exactly {n} and integer "
            "coefficients from -9 to 9 (the leading one is not 0). As a start you are told "
            f"f({free}) = {_evaluate(coefficients, free)}.\n"
            "Each turn you may evaluate it at one integer point from -5 to 5 by answering "
            "\\boxed{f(3)} (any such point), or give the coefficients from the highest power "
            f"down to the constant, {n + 1} integers, as \\boxed{{"
            + ", ".join(["2", "-1", "0", "7", "-3", "4", "1", "5", "-2", "6"][: n + 1])
            + "}.\n"
            f"You have {self.max_attempts} attempts at the coefficients within "
            f"{self.max_turns} turns; a wrong list is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        query = _QUERY.fullmatch(content)
        reward, terminated = 0.0, False
        format_help = (
            "Answer \\boxed{f(x)} with an integer x from -5 to 5 to evaluate, or "
            f"\\boxed{{a{self.degree}, ..., a0}} with {self.degree + 1} integer coefficients."
        )
        if query:
            x = int(next(g for g in query.groups() if g is not None))
            if -5 <= x <= 5:
                observation = f"f({x}) = {_evaluate(self._coefficients, x)}."
            else:
                observation = f"x = {x} is outside -5..5. " + format_help
        elif _LIST.fullmatch(content) and len(re.findall(r"-?\d+", content)) == self.degree + 1:
            guess = [int(v) for v in re.findall(r"-?\d+", content)]
            if guess == self._coefficients:
                observation, reward, terminated = "Correct, that is the polynomial!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = "Those coefficients are wrong. " + (
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
        points = [0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5][: self.degree + 1]
        lines = [f"\\boxed{{f({x})}}" for x in points]
        lines.append("\\boxed{" + ", ".join(str(c) for c in self._coefficients) + "}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
