"""Pancake flips: sort a stack by flipping its top part, in the fewest flips possible."""

import functools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _flip(stack, k):
    return stack[:k][::-1] + stack[k:]


@functools.lru_cache(maxsize=4)
def _distances(n):
    """Fewest flips from every stack of sizes 1..n (top first) to the sorted one, by BFS."""
    start = tuple(range(1, n + 1))
    best, frontier = {start: 0}, [start]
    while frontier:
        following = []
        for stack in frontier:
            for k in range(2, n + 1):
                other = _flip(stack, k)
                if other not in best:
                    best[other] = best[stack] + 1
                    following.append(other)
        frontier = following
    return best


class PancakeFlipEnv:
    """Multi-turn: flip the top k pancakes per turn; sorting in the fewest flips wins.

    A stack is a tuple of sizes listed from the top down; sorted means 1 on top.
    """

    skill = "Optimization"

    def __init__(
        self,
        max_turns: int = 10,
        size: int = 7,
        min_flips: int = 5,
        max_attempts: int = 2,
        **kwargs,
    ):
        self.max_turns = max_turns
        self.size = max(4, min(size, 8))
        self.min_flips = min_flips
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        distances = _distances(self.size)
        floor = min(self.min_flips, max(distances.values()))
        while True:
            start = tuple(rng.sample(range(1, self.size + 1), self.size))
            if distances[start] >= floor:
                break
        self._start, self._stack, self._best = start, start, distances[start]
        self._flips = 0
        self._turn = 0
        self._attempts = 0
        self._done = False
        n = self.size
        observation = (
            f"A stack of {n} pancakes of sizes 1 to {n} is listed from the top down: "
            f"{self._show()}. Sort it so that size 1 is on top and size {n} at the bottom. Each "
            f"turn flip the top K pancakes (2 to {n}) over, reversing their order, by answering "
            f"\\boxed{{flip K}}, for example \\boxed{{flip 3}}. The fewest flips that sort this "
            f"stack is {self._best}, and you win only by sorting it in that many. After "
            f"{self._best} flips without a sorted stack the attempt fails and the stack returns "
            f"to its start. You have {self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def _show(self) -> str:
        return " ".join(map(str, self._stack))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        match = re.fullmatch(r"(?:flip\s*)?(\d+)", (_last_boxed(action) or "").lower())
        reward, terminated = 0.0, False
        n = self.size
        if not match or not 2 <= int(match.group(1)) <= n:
            observation = (
                f"Answer \\boxed{{flip K}} with K from 2 to {n}, for example \\boxed{{flip 3}}. "
                f"The stack is {self._show()}."
            )
        else:
            self._stack = _flip(self._stack, int(match.group(1)))
            self._flips += 1
            observation = f"Flip {self._flips}: the stack is now {self._show()}."
            if self._stack == tuple(range(1, n + 1)):
                observation += f" Sorted in {self._flips} flips, the fewest possible!"
                reward, terminated = 1.0, True
            elif self._flips >= self._best:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                if terminated:
                    observation += " Still unsorted; no attempts left."
                else:
                    self._stack, self._flips = self._start, 0
                    observation += (
                        f" Still unsorted, so the attempt fails; the stack is back to "
                        f"{self._show()}. {left} attempt(s) left."
                    )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "flips": getattr(self, "_flips", 0)}

    def solution(self) -> str:
        distances, stack, lines = _distances(self.size), self._start, []
        while distances[stack]:
            k = min(
                k
                for k in range(2, self.size + 1)
                if distances[_flip(stack, k)] == distances[stack] - 1
            )
            stack = _flip(stack, k)
            lines.append(f"\\boxed{{flip {k}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
