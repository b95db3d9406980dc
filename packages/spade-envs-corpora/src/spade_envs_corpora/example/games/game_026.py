"""Nonogram: fill a 6 x 6 picture from the run lengths of every row and column."""

import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _runs(line):
    return tuple(len(list(group)) for value, group in itertools.groupby(line) if value)


def _count_solutions(row_clues, col_clues, n, limit=2):
    patterns = [
        [p for p in itertools.product((0, 1), repeat=n) if _runs(p) == clue] for clue in row_clues
    ]

    def prefix_ok(line, clue, complete):
        runs = _runs(line)
        if complete:
            return runs == clue
        if not runs:
            return True
        if len(runs) > len(clue):
            return False
        last_open = line[-1] == 1
        for i, run in enumerate(runs):
            if i == len(runs) - 1 and last_open:
                if run > clue[i]:
                    return False
            elif run != clue[i]:
                return False
        return True

    chosen = []

    def search(r):
        if r == n:
            return 1
        total = 0
        for pattern in patterns[r]:
            chosen.append(pattern)
            if all(
                prefix_ok(tuple(row[c] for row in chosen), col_clues[c], r == n - 1)
                for c in range(n)
            ):
                total += search(r + 1)
            chosen.pop()
            if total >= limit:
                break
        return total

    return search(0)


class NonogramEnv:
    """Few attempts: a wrong picture is told which of its rows are wrong."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, size: int = 6, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.size = max(4, min(size, 7))
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.size
        while True:
            cells = [1] * (n * n * 11 // 20) + [0] * (n * n - n * n * 11 // 20)
            rng.shuffle(cells)
            grid = [tuple(cells[r * n : (r + 1) * n]) for r in range(n)]
            row_clues = [_runs(row) for row in grid]
            col_clues = [_runs(tuple(row[c] for row in grid)) for c in range(n)]
            if _count_solutions(row_clues, col_clues, n) == 1:
                break
        self._grid = grid
        self._turn = 0
        self._attempts = 0
        self._done = False

        def show(clue):
            return " ".join(map(str, clue)) if clue else "0"

        rows = "\n".join(f"row {r + 1}: {show(c)}" for r, c in enumerate(row_clues))
        cols = "\n".join(f"column {c + 1}: {show(k)}" for c, k in enumerate(col_clues))
        example = ";".join(["#.#..#", "##....", "......", ".####.", "#....#", "..##.."][:n])
        observation = (
            f"Fill a {n} x {n} nonogram. Each clue lists, in order, the lengths of the runs of "
            "consecutive filled cells in that line (0 means the line is empty); runs are "
            "separated by at least one empty cell. Rows go top to bottom, columns left to right."
            f"\n{rows}\n{cols}\nExactly one picture fits. Answer with the rows from the top, "
            "'#' for filled and '.' for empty, separated by ';', for example "
            f"\\boxed{{{example[: n * (n + 1) - 1]}}}. A wrong picture is told which rows are "
            f"wrong. You have {self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        n = self.size
        content = re.sub(r"\s", "", _last_boxed(action) or "")
        rows = content.split(";")
        reward, terminated = 0.0, False
        if len(rows) != n or not all(re.fullmatch(f"[#.]{{{n}}}", row) for row in rows):
            observation = (
                f"Give {n} rows of {n} characters, '#' filled and '.' empty, separated by ';', "
                f"inside \\boxed{{...}}, for example \\boxed{{{';'.join(['#' * n] * n)}}}."
            )
        else:
            picture = [tuple(int(ch == "#") for ch in row) for row in rows]
            wrong = [str(r + 1) for r in range(n) if picture[r] != self._grid[r]]
            if not wrong:
                observation, reward, terminated = "The picture is right. You win!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"Wrong rows: {', '.join(wrong)}. " + (
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
        rows = ["".join("#" if v else "." for v in row) for row in self._grid]
        return "\\boxed{" + ";".join(rows) + "}"

    def close(self) -> None:
        self._done = True
