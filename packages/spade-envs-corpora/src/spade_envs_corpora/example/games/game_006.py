"""Sonar search: locate a hidden cell on a large grid from Manhattan-distance pings."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class SonarSearchEnv:
    """Multi-turn: each probe reports its distance to the hidden cell; probing it wins."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, size: int = 30, **kwargs):
        self.max_turns = max_turns
        self.size = max(3, size)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._target = (rng.randrange(1, self.size + 1), rng.randrange(1, self.size + 1))
        n = self.size
        first = self._target
        while first == self._target:  # a free first ping from a cell that is not the beacon
            first = (rng.randrange(1, n + 1), rng.randrange(1, n + 1))
        first_distance = abs(first[0] - self._target[0]) + abs(first[1] - self._target[1])
        self._turn = 0
        self._done = False
        observation = (
            f"A beacon is hidden in one cell of a {n} x {n} grid; rows and columns are numbered "
            f"1 to {n}, row 1 at the top and column 1 at the left. Each turn probe one cell by "
            "answering \\boxed{row, column}, for example \\boxed{5, 12}. A probe of the beacon's "
            "cell wins; any other probe reports its Manhattan distance to the beacon "
            "(|row difference| + |column difference|). You have "
            f"{self.max_turns} probes. A first free probe of ({first[0]}, {first[1]}) reported "
            f"distance {first_distance}."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        match = re.fullmatch(r"\(?\s*(-?\d+)\s*[, ]\s*(-?\d+)\s*\)?", _last_boxed(action) or "")
        reward, terminated = 0.0, False
        n = self.size
        if not match:
            observation = "Answer with a row and a column inside \\boxed{...}, e.g. \\boxed{5, 12}."
        else:
            row, col = int(match.group(1)), int(match.group(2))
            if not (1 <= row <= n and 1 <= col <= n):
                observation = f"({row}, {col}) is off the grid; both numbers must be 1 to {n}."
            elif (row, col) == self._target:
                observation, reward, terminated = f"Found the beacon at ({row}, {col})!", 1.0, True
            else:
                distance = abs(row - self._target[0]) + abs(col - self._target[1])
                observation = f"Probe ({row}, {col}): distance {distance}."
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " Out of probes."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        # Two corner probes pin the cell down: row + col and row - col follow from the distances.
        corners = [(1, 1), (1, self.size)]
        probes = [cell for cell in corners if cell != self._target] + [self._target]
        return "\n".join(f"\\boxed{{{r}, {c}}}" for r, c in probes)

    def close(self) -> None:
        self._done = True
