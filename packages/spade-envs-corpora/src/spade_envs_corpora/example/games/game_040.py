"""Tile completion: a grid is one hidden tile repeated; uncover cells and fill in marked ones."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ROWS, _COLS = 8, 12
_SYMBOLS = "ABCDEF"
_TARGETS = 3


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _exact_periods(tile, p, q):
    """True when the tile repeats with no smaller period down or across."""
    for d in range(1, p):
        if p % d == 0 and all(tile[r] == tile[r % d] for r in range(p)):
            return False
    for d in range(1, q):
        if q % d == 0 and all(row[c] == row[c % d] for row in tile for c in range(q)):
            return False
    return True


class TileCompletionEnv:
    """Multi-turn: uncover hidden cells one at a time, then name the three marked cells."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            p, q = rng.choice([2, 3]), rng.choice([3, 4, 5])
            tile = ["".join(rng.choice(_SYMBOLS) for _ in range(q)) for _ in range(p)]
            if _exact_periods(tile, p, q):
                break
        self._p, self._q = p, q
        self._grid = [[tile[r % p][c % q] for c in range(_COLS)] for r in range(_ROWS)]
        classes = [(a, b) for a in range(p) for b in range(q)]
        hidden = rng.sample(classes, _TARGETS)
        visible = set()
        for a, b in classes:
            if (a, b) in hidden:
                continue
            cells = [(r, c) for r in range(a, _ROWS, p) for c in range(b, _COLS, q)]
            shown = [cell for cell in cells if rng.random() < 0.7]
            if len(shown) < 2:
                shown = rng.sample(cells, 2)
            visible.update(shown)
        self._targets = []
        for a, b in hidden:
            cells = [(r, c) for r in range(a, _ROWS, p) for c in range(b, _COLS, q)]
            self._targets.append(rng.choice(cells))
        self._visible = visible
        self._answer = "".join(self._grid[r][c] for r, c in self._targets)
        self._turn = 0
        self._wrong = 0
        self._done = False
        lines = ["    " + " ".join(f"{c + 1:>2}" for c in range(_COLS))]
        for r in range(_ROWS):
            cells = []
            for c in range(_COLS):
                if (r, c) in self._targets:
                    cells.append(str(self._targets.index((r, c)) + 1))
                else:
                    cells.append(self._grid[r][c] if (r, c) in visible else "?")
            lines.append(f"{r + 1:>2}  " + " ".join(f"{s:>2}" for s in cells))
        observation = (
            f"This {_ROWS} x {_COLS} grid of letters {', '.join(_SYMBOLS)} is one small "
            "rectangular tile repeated across and down (the tile starts at the top-left corner). "
            "Cells marked ? are hidden; the cells marked 1, 2 and 3 are the ones to fill in.\n"
            + "\n".join(lines)
            + "\nEach turn you may uncover one hidden cell (not a marked one) by answering "
            "\\boxed{reveal ROW COL}, e.g. \\boxed{reveal 2 5}.\n"
            "Goal: give the letters of cells 1, 2, 3 in that order, e.g. \\boxed{answer CAF}. "
            f"You have {self.max_answers} answers and {self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        reveal = re.fullmatch(r"REVEAL\s*\(?\s*(\d+)\s*[, ]\s*(\d+)\s*\)?", content)
        answer = re.fullmatch(r"ANSWER\s+([A-Z]+)", content)
        reward, terminated = 0.0, False
        if reveal:
            r, c = int(reveal.group(1)) - 1, int(reveal.group(2)) - 1
            if not (0 <= r < _ROWS and 0 <= c < _COLS):
                observation = (
                    f"Rows are 1 to {_ROWS} and columns 1 to {_COLS} (\\boxed{{reveal 2 5}})."
                )
            elif (r, c) in self._targets:
                observation = (
                    "Marked cells cannot be uncovered; give them with \\boxed{answer ...}."
                )
            else:
                observation = f"Cell (row {r + 1}, column {c + 1}) is {self._grid[r][c]}."
        elif answer and len(answer.group(1)) == _TARGETS:
            guess = answer.group(1)
            if guess == self._answer:
                observation, reward, terminated = "Correct, the tile is complete!", 1.0, True
            else:
                self._wrong += 1
                left = self.max_answers - self._wrong
                terminated = left <= 0
                right = sum(a == b for a, b in zip(guess, self._answer, strict=True))
                observation = f"{guess} is wrong ({right} of {_TARGETS} letters right). " + (
                    "No answers left." if terminated else f"{left} answer(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{reveal ROW COL} to uncover a cell, or \\boxed{answer XYZ} with "
                "the three letters of cells 1, 2, 3."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        lines = []
        for r, c in self._targets:
            # Another cell of the same tile position: one tile step up or down, left or right.
            r2 = r + self._p if r + self._p < _ROWS else r - self._p
            lines.append(f"\\boxed{{reveal {r2 + 1} {c + 1}}}")
        return "\n".join(lines + [f"\\boxed{{answer {self._answer}}}"])

    def close(self) -> None:
        self._done = True
