"""Knight's errand: a chess knight must visit three marked squares while avoiding pits."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SIZE = 8
_COLUMNS = "ABCDEFGH"
_JUMPS = [(1, 2), (2, 1), (-1, 2), (-2, 1), (1, -2), (2, -1), (-1, -2), (-2, -1)]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _name(cell):
    return f"{_COLUMNS[cell[1]]}{cell[0] + 1}"


def _jumps(pits, cell):
    r, c = cell
    for dr, dc in _JUMPS:
        nr, nc = r + dr, c + dc
        if 0 <= nr < _SIZE and 0 <= nc < _SIZE and (nr, nc) not in pits:
            yield (nr, nc)


def _route(pits, start, targets):
    """The shortest list of squares that visits every target, by search over (square, visited)."""
    full = (1 << len(targets)) - 1
    first = (start, 0)
    parents = {first: None}
    queue = deque([first])
    while queue:
        cell, mask = state = queue.popleft()
        if mask == full:
            route = []
            while parents[state] is not None:
                route.append(state[0])
                state = parents[state]
            return route[::-1]
        for nxt in _jumps(pits, cell):
            new = mask | (1 << targets.index(nxt) if nxt in targets else 0)
            if (nxt, new) not in parents:
                parents[(nxt, new)] = state
                queue.append((nxt, new))
    return None


class KnightErrandEnv:
    """Multi-turn: up to four knight jumps per turn; the board is shown after each turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, pits: int = 10, jumps_per_turn: int = 4, **kwargs):
        self.max_turns = max_turns
        self.pits = pits
        self.jumps_per_turn = max(1, jumps_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        cells = [(r, c) for r in range(_SIZE) for c in range(_SIZE)]
        while True:
            picked = rng.sample(cells, self.pits + 4)
            pits, start, targets = set(picked[: self.pits]), picked[self.pits], picked[-3:]
            route = _route(pits, start, targets)
            if route and 8 <= len(route) <= 4 * self.jumps_per_turn:
                break
        self._pits = pits
        self._position = start
        self._targets = sorted(targets)
        self._visited = set()
        self._route = route
        self._turn = 0
        self._done = False
        observation = (
            "A chess knight N stands on an 8 x 8 board; * marks a square it must visit, # is a "
            "pit it may never land on, and . is an ordinary square. Columns are A to H from the "
            "left and rows 1 to 8 from the top, so a square is named like C5.\n"
            f"{self._render()}\n"
            f"The knight is on {_name(start)}; it must visit "
            + ", ".join(map(_name, self._targets))
            + " in any order. A knight jumps two squares along a row or column and then one "
            "square sideways (an L shape), passing over anything in between. Each turn make one "
            f"to {self.jumps_per_turn} jumps by naming the landing squares in order, for example "
            "\\boxed{C5 E4}. A jump that is not a knight's move, leaves the board or lands in a "
            "pit stops the rest of that turn's jumps. Visiting every marked square wins. You "
            f"have {self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        rows = ["  " + " ".join(_COLUMNS)]
        for r in range(_SIZE):
            line = []
            for c in range(_SIZE):
                cell = (r, c)
                if cell == self._position:
                    line.append("N")
                elif cell in self._pits:
                    line.append("#")
                elif cell in self._targets:
                    line.append("+" if cell in self._visited else "*")
                else:
                    line.append(".")
            rows.append(f"{r + 1} " + " ".join(line))
        return "\n".join(rows) + "\n(+ is a marked square already visited)"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        names = re.findall(r"[A-H][1-8]", content)
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[A-H][1-8]([\s,]+[A-H][1-8])*", content):
            observation = (
                "Name the landing squares, like C5, separated by spaces inside \\boxed{...}, "
                "e.g. \\boxed{C5 E4}."
            )
        elif len(names) > self.jumps_per_turn:
            observation = (
                f"At most {self.jumps_per_turn} jumps per turn; none were made. "
                "Answer like \\boxed{C5 E4}."
            )
        else:
            note = ""
            for count, name in enumerate(names, start=1):
                cell = (int(name[1]) - 1, _COLUMNS.index(name[0]))
                if cell not in set(_jumps(self._pits, self._position)):
                    reason = "lands in a pit" if cell in self._pits else "is not a knight's move"
                    note = f"Jump {count} (to {name}) {reason}; the remaining jumps were skipped.\n"
                    break
                self._position = cell
                if cell in self._targets:
                    self._visited.add(cell)
                if len(self._visited) == len(self._targets):
                    break
            if len(self._visited) == len(self._targets):
                observation, reward, terminated = "Every marked square is visited!", 1.0, True
            else:
                left = len(self._targets) - len(self._visited)
                observation = (
                    f"{note}The knight is on {_name(self._position)}; {left} marked square(s) "
                    f"left to visit.\n{self._render()}"
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "visited": len(self._visited)}

    def solution(self) -> str:
        step = self.jumps_per_turn
        chunks = [self._route[i : i + step] for i in range(0, len(self._route), step)]
        return "\n".join("\\boxed{" + " ".join(map(_name, chunk)) + "}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
