"""Lights Out: switch off every light of a 5 x 5 grid where a press toggles a plus shape."""

import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SIZE = 5
_COLUMNS = "ABCDE"


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _press(lights, r, c):
    for dr, dc in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < _SIZE and 0 <= nc < _SIZE:
            lights[nr][nc] ^= 1


def _solve(lights):
    """The fewest presses switching every light off, by light chasing over all top-row choices."""
    best = None
    for top in itertools.product((0, 1), repeat=_SIZE):
        grid = [row[:] for row in lights]
        presses = [(0, c) for c in range(_SIZE) if top[c]]
        for r, c in presses:
            _press(grid, r, c)
        for r in range(1, _SIZE):
            for c in range(_SIZE):
                if grid[r - 1][c]:
                    _press(grid, r, c)
                    presses.append((r, c))
        if not any(grid[-1]) and (best is None or len(presses) < len(best)):
            best = presses
    return best


def _name(r, c):
    return f"{_COLUMNS[c]}{r + 1}"


class LightsOutEnv:
    """Multi-turn: up to three presses per turn, the grid is shown after each turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, scramble: int = 8, presses_per_turn: int = 3, **kwargs):
        self.max_turns = max_turns
        self.scramble = max(3, scramble)
        self.presses_per_turn = max(1, presses_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            lights = [[0] * _SIZE for _ in range(_SIZE)]
            cells = rng.sample(range(_SIZE * _SIZE), self.scramble)
            for cell in cells:
                _press(lights, *divmod(cell, _SIZE))
            plan = _solve(lights)
            if len(plan) >= self.scramble - 2:
                break
        self._lights = lights
        self._plan = sorted(plan)
        self._turn = 0
        self._done = False
        observation = (
            "Lights Out on a 5 x 5 grid; O is a lit light and . an unlit one. Columns are A to E "
            "from the left and rows 1 to 5 from the top, so a cell is named like C2.\n"
            f"{self._render()}\n"
            "Pressing a cell toggles it and the cells directly above, below, left and right of it "
            "(those that exist). Each turn press one to "
            f"{self.presses_per_turn} cells, for example \\boxed{{B2 D4}}; they are pressed in "
            "order and the grid is shown again. Switching every light off wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        rows = ["  " + " ".join(_COLUMNS)]
        for r in range(_SIZE):
            rows.append(f"{r + 1} " + " ".join("O" if x else "." for x in self._lights[r]))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        cells = re.findall(r"[A-E][1-5]", content)
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[A-E][1-5]([\s,]+[A-E][1-5])*", content):
            observation = (
                "Name the cells to press, like C2, separated by spaces inside \\boxed{...}, "
                "e.g. \\boxed{B2 D4}."
            )
        elif len(cells) > self.presses_per_turn:
            observation = (
                f"At most {self.presses_per_turn} presses per turn; nothing was pressed. "
                "Answer like \\boxed{B2 D4}."
            )
        else:
            for cell in cells:
                _press(self._lights, int(cell[1]) - 1, _COLUMNS.index(cell[0]))
            if not any(map(any, self._lights)):
                observation, reward, terminated = "All lights are off!", 1.0, True
            else:
                lit = sum(map(sum, self._lights))
                observation = f"Pressed {' '.join(cells)}. {lit} lights are on:\n{self._render()}"
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "lit": sum(map(sum, self._lights))}

    def solution(self) -> str:
        names = [_name(r, c) for r, c in self._plan]
        step = self.presses_per_turn
        chunks = [names[i : i + step] for i in range(0, len(names), step)]
        return "\n".join("\\boxed{" + " ".join(chunk) + "}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
