"""Number building: combine given numbers two at a time with + - * / until the target appears."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVE = re.compile(r"(\d+)\s*([-+*/x×÷])\s*(\d+)")
_SYMBOL = {"x": "*", "×": "*", "÷": "/"}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _apply(a, op, b):
    """The result of a op b, or None when the move is not allowed (the results stay positive
    integers)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b if a > b else None
    if op == "*":
        return a * b
    return a // b if b > 0 and a % b == 0 else None


def _moves(numbers):
    """Every allowed move from a list of numbers: (a, op, b, the numbers after)."""
    found = []
    for i, a in enumerate(numbers):
        for j, b in enumerate(numbers):
            if i == j:
                continue
            rest = [n for k, n in enumerate(numbers) if k not in (i, j)]
            for op in "+-*/":
                value = _apply(a, op, b)
                if value is not None:
                    found.append((a, op, b, sorted(rest + [value])))
    return found


def _reachable(numbers, depth):
    """The values that can appear within `depth` moves."""
    seen, frontier = set(numbers), [sorted(numbers)]
    for _ in range(depth):
        following = []
        for state in frontier:
            for _, _, _, after in _moves(state):
                seen.update(after)
                following.append(after)
        frontier = following
    return seen


class NumberBuildEnv:
    """Multi-turn state game: each move replaces two numbers by their sum, difference, product
    or quotient; making the target wins, and a reset brings back the starting numbers."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"number-build:{seed}")
        while True:
            start = sorted([rng.randint(2, 10) for _ in range(4)] + [rng.choice([25, 50, 75, 100])])
            numbers, steps = list(start), []
            for _ in range(rng.choice([3, 4])):
                choices = [m for m in _moves(numbers) if m[1] != "/" or m[2] > 1]
                choices = [m for m in choices if m[1] != "*" or min(m[0], m[2]) > 1]
                a, op, b, numbers = rng.choice(choices)
                steps.append((a, op, b))
                value = _apply(a, op, b)
            early = any(_apply(*step) == value for step in steps[:-1])
            if 101 <= value <= 999 and not early and value not in _reachable(start, 2):
                break
        self._start, self._target, self._steps = start, value, steps
        self._numbers = list(start)
        self._turn = 0
        self._done = False
        observation = (
            f"Numbers: {', '.join(map(str, start))}. Target: {value}.\n"
            "Each turn combine two of your current numbers with +, -, * or / by answering, "
            "for example, \\boxed{75 * 3}: the two numbers are replaced by the result. Every "
            "result must be a positive whole number (subtract the smaller from the larger, "
            "divide only when it goes exactly). You win as soon as the target is one of your "
            "numbers. \\boxed{reset} brings back the starting numbers. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        move = _MOVE.fullmatch(content)
        reward, terminated = 0.0, False
        if content.lower() == "reset":
            self._numbers = list(self._start)
            observation = f"Back to the start. Your numbers: {self._show()}."
        elif move:
            a, op, b = (
                int(move.group(1)),
                _SYMBOL.get(move.group(2), move.group(2)),
                int(move.group(3)),
            )
            rest = list(self._numbers)
            value = None
            if a in rest:
                rest.remove(a)
                if b in rest:
                    rest.remove(b)
                    value = _apply(a, op, b)
            if value is None:
                observation = (
                    f"{a} {op} {b} is not allowed: both numbers must be among yours and the "
                    f"result a positive whole number. Your numbers: {self._show()}."
                )
            else:
                self._numbers = sorted(rest + [value])
                observation = f"{a} {op} {b} = {value}. Your numbers: {self._show()}."
                if value == self._target:
                    observation += " You made the target!"
                    reward, terminated = 1.0, True
        else:
            observation = (
                "Answer with one move such as \\boxed{75 * 3} (two of your numbers and one of "
                f"+ - * /) or \\boxed{{reset}}. Your numbers: {self._show()}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _show(self) -> str:
        return ", ".join(map(str, self._numbers))

    def _info(self) -> dict:
        return {"turn": self._turn, "numbers": list(self._numbers)}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{a} {op} {b}}}" for a, op, b in self._steps)

    def close(self) -> None:
        self._done = True
