"""Peak search: find the top of a hidden single-peaked function with few evaluations."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class PeakSearchEnv:
    """Multi-turn: evaluate the hidden function at chosen points, then name its peak.

    `_values[x - 1]` is f(x); f rises strictly up to the peak and falls strictly after it.
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, size: int = 200, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.size = max(10, min(size, 5000))
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.size
        peak = rng.randrange(max(2, n // 10), n - n // 10 + 1)
        top = rng.randrange(5000, 9000)
        values = [0] * (n + 1)
        values[peak] = top
        for x in range(peak - 1, 0, -1):  # irregular steps: no formula to fit, only the shape
            values[x] = values[x + 1] - rng.randint(1, 40)
        for x in range(peak + 1, n + 1):
            values[x] = values[x - 1] - rng.randint(1, 40)
        self._values, self._peak = values, peak
        free = rng.choice([x for x in range(1, n + 1) if x != peak])
        self._turn = 0
        self._answers = 0
        self._done = False
        observation = (
            f"A hidden function f is defined on the integers 1 to {n}. It is single-peaked: it "
            "strictly increases up to one peak position and strictly decreases after it, but "
            "its steps are irregular. Each turn either evaluate it at one point with "
            "\\boxed{eval X}, for example \\boxed{eval 57}, or name the peak with "
            f"\\boxed{{peak X}}. You have {self.max_turns} turns in all and "
            f"{self.max_answers} peak answers; a wrong answer is only marked wrong. A free "
            f"first evaluation gave f({free}) = {values[free]}."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        match = re.fullmatch(
            r"(eval|peak)\s*(?:x\s*=\s*)?(-?\d+)", (_last_boxed(action) or "").lower()
        )
        reward, terminated = 0.0, False
        n = self.size
        if not match:
            observation = (
                "Answer \\boxed{eval X} to evaluate f at X or \\boxed{peak X} to name the peak, "
                "for example \\boxed{eval 57}."
            )
        elif not 1 <= int(match.group(2)) <= n:
            observation = f"{match.group(2)} is outside 1 to {n}."
        elif match.group(1) == "eval":
            x = int(match.group(2))
            observation = f"f({x}) = {self._values[x]}."
        elif int(match.group(2)) == self._peak:
            observation, reward, terminated = f"Correct, the peak is at {self._peak}!", 1.0, True
        else:
            self._answers += 1
            left = self.max_answers - self._answers
            terminated = left <= 0
            observation = f"{match.group(2)} is not the peak. " + (
                "No answers left." if terminated else f"{left} answer(s) left."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "answers": getattr(self, "_answers", 0)}

    def solution(self) -> str:
        # Golden-section search over the integers, reusing one old point per step.
        lines, cache = [], {}

        def f(x):
            if x not in cache:
                cache[x] = self._values[x]
                lines.append(f"\\boxed{{eval {x}}}")
            return cache[x]

        low, high, inner = 1, self.size, None
        while low < high:
            if inner is None or not low <= inner <= high:
                inner = low + round((high - low) * 0.382)
            other = low + high - inner
            if other == inner:
                other = inner + 1 if inner < high else inner - 1
            left, right = min(inner, other), max(inner, other)
            if f(left) < f(right):
                low, inner = left + 1, right
            elif f(left) > f(right):
                high, inner = right - 1, left
            else:
                low, high, inner = left + 1, right - 1, None
        lines.append(f"\\boxed{{peak {low}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
