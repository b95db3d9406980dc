"""Lattice paths: count the right/down routes across a grid with blocked squares."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_CHECK = re.compile(r"check\s*\(?\s*(\d+)\s*[, ]\s*(\d+)\s*\)?\s*[=: ]\s*(\d+)", re.IGNORECASE)


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _path_counts(grid):
    """Number of right/down paths from the top-left square to every square."""
    rows, cols = len(grid), len(grid[0])
    counts = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "#":
                continue
            if r == 0 and c == 0:
                counts[r][c] = 1
            else:
                counts[r][c] = (counts[r - 1][c] if r else 0) + (counts[r][c - 1] if c else 0)
    return counts


class LatticePathsEnv:
    """Multi-turn: check partial counts at chosen squares (told right or wrong), then give the
    number of paths to the goal."""

    skill = "Math"

    def __init__(
        self, max_turns: int = 10, rows: int = 7, cols: int = 8, max_attempts: int = 2, **kwargs
    ):
        self.max_turns = max_turns
        self.rows, self.cols = max(3, rows), max(3, cols)
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"lattice-paths:{seed}")
        while True:
            grid = [
                ["#" if rng.random() < 0.2 else "." for _ in range(self.cols)]
                for _ in range(self.rows)
            ]
            grid[0][0], grid[-1][-1] = "S", "G"
            counts = _path_counts(grid)
            if counts[-1][-1] >= 60:
                break
        self._grid, self._counts = grid, counts
        self._answer = counts[-1][-1]
        self._turn = 0
        self._attempts = 0
        self._done = False
        header = "    " + " ".join(f"{c:>2}" for c in range(1, self.cols + 1))
        lines = [
            f"{r:>2}  " + " ".join(f"{cell:>2}" for cell in row)
            for r, row in enumerate(grid, start=1)
        ]
        observation = (
            "Count the paths from S (row 1, column 1) to G (bottom-right) that move only one "
            "square right or one square down at a time and never enter a # square:\n"
            + "\n".join([header, *lines])
            + "\n\nEach turn you may check a partial count: \\boxed{check 3 4 = 10} asks whether "
            "exactly 10 paths lead from S to row 3, column 4, and is answered right or wrong "
            "(any square except G). Or give the number of paths to G as "
            f"\\boxed{{N}}. You have {self.max_attempts} attempts at G within {self.max_turns} "
            "turns; a wrong count for G is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        check = _CHECK.fullmatch(content)
        reward, terminated = 0.0, False
        if check:
            r, c, claim = (int(g) for g in check.groups())
            if not (1 <= r <= self.rows and 1 <= c <= self.cols):
                observation = f"Row {r}, column {c} is not on the grid."
            elif (r, c) == (self.rows, self.cols):
                observation = "The count at G cannot be checked; answer it as \\boxed{N}."
            else:
                true = self._counts[r - 1][c - 1]
                verdict = "right" if claim == true else "wrong"
                observation = f"{claim} paths to row {r}, column {c}: {verdict}."
        elif re.fullmatch(r"\d+", content):
            if int(content) == self._answer:
                observation, reward, terminated = "Correct count!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"{content} is not the number of paths to G. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{check R C = N} to check a partial count at row R, column C, or "
                "\\boxed{N} with the number of paths to G."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        # Check the two squares that feed G (the count at G is their sum), then answer.
        lines = []
        for r, c in [(self.rows - 1, self.cols), (self.rows, self.cols - 1)]:
            if self._grid[r - 1][c - 1] != "#":
                lines.append(f"\\boxed{{check {r} {c} = {self._counts[r - 1][c - 1]}}}")
        return "\n".join(lines + [f"\\boxed{{{self._answer}}}"])

    def close(self) -> None:
        self._done = True
