"""Number reach: steer a number to a target with a few fixed operations."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LIMIT = 9999


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _apply(operation, value):
    """The value after one operation, or None when it is not allowed."""
    kind, k = operation
    if kind == "add":
        result = value + k
    elif kind == "sub":
        result = value - k
    elif kind == "mul":
        result = value * k
    else:
        result = value // k if value % k == 0 else None
    return result if result is not None and 0 <= result <= _LIMIT else None


def _describe(operation):
    kind, k = operation
    return {
        "add": f"add {k}",
        "sub": f"subtract {k}",
        "mul": f"multiply by {k}",
        "div": f"divide by {k} (only when it goes exactly)",
    }[kind]


def _shortest_paths(operations, start):
    """Breadth-first search: the shortest sequence of operation letters to every value."""
    routes = {start: ""}
    queue = deque([start])
    while queue:
        value = queue.popleft()
        if len(routes[value]) >= 9:
            continue
        for letter, operation in operations.items():
            following = _apply(operation, value)
            if following is not None and following not in routes:
                routes[following] = routes[value] + letter
                queue.append(following)
    return routes


class NumberReachEnv:
    """Multi-turn state game: one operation per turn; reaching the target number wins."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"number-reach:{seed}")
        while True:
            operations = {
                "A": ("add", rng.randint(3, 13)),
                "B": ("sub", rng.randint(2, 11)),
                "C": ("mul", rng.randint(2, 4)),
                "D": ("div", rng.randint(2, 3)),
            }
            start = rng.randint(2, 60)
            routes = _shortest_paths(operations, start)
            far = [v for v, route in routes.items() if 6 <= len(route) <= 7 and v >= 100]
            if far:
                break
        target = rng.choice(sorted(far))
        self._operations, self._target = operations, target
        self._route = routes[target]
        self._value = start
        self._turn = 0
        self._done = False
        rules = "\n".join(f"{letter}: {_describe(op)}" for letter, op in operations.items())
        observation = (
            f"Your number is {start}; the target is {target}. Each turn apply one operation by "
            "answering its letter, for example \\boxed{A}:\n"
            f"{rules}\n"
            f"Results must stay whole numbers from 0 to {_LIMIT}; a move that breaks this is "
            "refused and leaves the number as it was. You win when your number equals the "
            f"target. There is no undo. You have {self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if content in self._operations:
            operation = self._operations[content]
            following = _apply(operation, self._value)
            if following is None:
                observation = (
                    f"{content} ({_describe(operation)}) is not allowed on {self._value}; "
                    f"your number stays {self._value}."
                )
            else:
                observation = f"{content}: {self._value} -> {following}."
                self._value = following
                if following == self._target:
                    observation += " You reached the target!"
                    reward, terminated = 1.0, True
        else:
            observation = (
                f"Answer one letter from {', '.join(self._operations)} inside \\boxed{{...}}, "
                f"e.g. \\boxed{{C}}. Your number is {self._value}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "value": self._value}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{letter}}}" for letter in self._route)

    def close(self) -> None:
        self._done = True
