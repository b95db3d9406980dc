"""Maze walk: move through a walled grid to the goal, several moves per turn."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _carve(rng, rows, cols, extra_openings):
    """A maze on a (2*rows+1) x (2*cols+1) character grid: True is open floor."""
    grid = [[False] * (2 * cols + 1) for _ in range(2 * rows + 1)]
    start = (rng.randrange(rows), rng.randrange(cols))
    grid[2 * start[0] + 1][2 * start[1] + 1] = True
    seen, stack = {start}, [start]
    while stack:  # depth-first carving gives long winding corridors
        r, c = stack[-1]
        options = [
            (r + dr, c + dc)
            for dr, dc in _MOVES.values()
            if 0 <= r + dr < rows and 0 <= c + dc < cols and (r + dr, c + dc) not in seen
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = rng.choice(options)
        grid[r + nr + 1][c + nc + 1] = True
        grid[2 * nr + 1][2 * nc + 1] = True
        seen.add((nr, nc))
        stack.append((nr, nc))
    # A few extra openings make loops, so more than one route may exist.
    for _ in range(extra_openings):
        r, c = rng.randrange(1, 2 * rows), rng.randrange(1, 2 * cols)
        if (r + c) % 2 == 1:
            grid[r][c] = True
    return grid


def _shortest_paths(grid, source):
    """Move strings of shortest paths from source to every reachable square."""
    paths = {source: ""}
    queue = deque([source])
    while queue:
        r, c = queue.popleft()
        for name, (dr, dc) in _MOVES.items():
            nxt = (r + dr, c + dc)
            if grid[nxt[0]][nxt[1]] and nxt not in paths:
                paths[nxt] = paths[(r, c)] + name
                queue.append(nxt)
    return paths


class MazeWalkEnv:
    """Multi-turn: each turn a string of moves is walked until the goal or a wall."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, rows: int = 5, cols: int = 5, **kwargs):
        self.max_turns = max_turns
        self.rows = rows
        self.cols = cols
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._grid = _carve(rng, self.rows, self.cols, extra_openings=3)
        floor = [(r, c) for r, row in enumerate(self._grid) for c, cell in enumerate(row) if cell]
        self._position = rng.choice(floor)
        paths = _shortest_paths(self._grid, self._position)
        # The goal is the farthest square, so no short lucky walk reaches it.
        self._goal = max(paths, key=lambda square: (len(paths[square]), square))
        self._turn = 0
        self._done = False
        observation = (
            "You are @ in this maze; # is wall, . is floor, G is the goal. Rows are numbered "
            "from the top and columns from the left, both from 0 (the header shows the last digit).\n"
            f"{self._render()}\n"
            "Each turn answer with one or more moves inside \\boxed{...}, using U (up), D (down), "
            "L (left) and R (right), for example \\boxed{RRD}. The moves are made in order; a move "
            "into a wall stops the rest of that turn's moves. Reaching G wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        # Column numbers as their last digit, so the header stays one character per column.
        rows = ["   " + "".join(str(c % 10) for c in range(len(self._grid[0])))]
        for r, row in enumerate(self._grid):
            cells = []
            for c, cell in enumerate(row):
                square = (r, c)
                cells.append(
                    "@"
                    if square == self._position
                    else "G"
                    if square == self._goal
                    else "."
                    if cell
                    else "#"
                )
            rows.append(f"{r:2d} " + "".join(cells))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        moves = re.sub(r"[\s,]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[UDLR]+", moves):
            observation = "Answer with moves made of the letters U, D, L, R inside \\boxed{...}."
        else:
            note = ""
            for count, move in enumerate(moves, start=1):
                dr, dc = _MOVES[move]
                r, c = self._position[0] + dr, self._position[1] + dc
                if not self._grid[r][c]:
                    note = f"Move {count} ({move}) hit a wall; the remaining moves were skipped. "
                    break
                self._position = (r, c)
                if self._position == self._goal:
                    break
            if self._position == self._goal:
                observation, reward, terminated = "You reached the goal!", 1.0, True
            else:
                observation = (
                    f"{note}You are now at row {self._position[0]}, column {self._position[1]}.\n"
                    + self._render()
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "position": list(self._position)}

    def solution(self) -> str:
        return f"\\boxed{{{_shortest_paths(self._grid, self._position)[self._goal]}}}"

    def close(self) -> None:
        self._done = True
