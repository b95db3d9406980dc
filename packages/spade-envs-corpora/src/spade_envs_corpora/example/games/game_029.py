"""Sliding tiles: restore a scrambled 3 x 3 sliding puzzle by sliding numbered tiles."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_GOAL = (1, 2, 3, 4, 5, 6, 7, 8, 0)
_SIDE = 3


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _neighbours(index):
    r, c = divmod(index, _SIDE)
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < _SIDE and 0 <= nc < _SIDE:
            out.append(nr * _SIDE + nc)
    return out


def _slide(board, tile):
    """The board after sliding tile into the gap, or None when it is not next to the gap."""
    gap, where = board.index(0), board.index(tile)
    if where not in _neighbours(gap):
        return None
    cells = list(board)
    cells[gap], cells[where] = tile, 0
    return tuple(cells)


class SlidingTilesEnv:
    """Multi-turn: each turn slides one or more tiles; the board is shown after every turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, scramble: int = 22, **kwargs):
        self.max_turns = max_turns
        self.scramble = max(4, scramble)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # A self-avoiding random walk of the gap from the solved board; undoing it solves the
        # puzzle and never passes through the solved board before the end.
        while True:
            board, seen, tiles = _GOAL, {_GOAL}, []
            for _ in range(self.scramble):
                options = [board[i] for i in _neighbours(board.index(0))]
                options = [t for t in options if _slide(board, t) not in seen]
                if not options:
                    break
                tile = rng.choice(options)
                board = _slide(board, tile)
                seen.add(board)
                tiles.append(tile)
            if len(tiles) == self.scramble:
                break
        self._board = board
        self._plan = list(reversed(tiles))
        self._turn = 0
        self._done = False
        observation = (
            "A 3 x 3 sliding puzzle; _ is the gap:\n"
            f"{self._render()}\n"
            "The goal is\n1 2 3\n4 5 6\n7 8 _\n"
            "Each turn slide one or more tiles into the gap by naming them in order, for example "
            "\\boxed{6 3 2}; a tile can move only when it is directly above, below, left or "
            "right of the gap. A tile that cannot move stops the rest of that turn's slides. "
            f"Reaching the goal wins. You have {self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        rows = []
        for r in range(_SIDE):
            cells = self._board[r * _SIDE : (r + 1) * _SIDE]
            rows.append(" ".join(str(t) if t else "_" for t in cells))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[1-8]([\s,]*[1-8])*", content):
            observation = (
                "Name the tiles to slide, digits 1 to 8, inside \\boxed{...}, e.g. \\boxed{6 3 2}."
            )
        else:
            note = ""
            for count, tile in enumerate(re.findall(r"[1-8]", content), start=1):
                moved = _slide(self._board, int(tile))
                if moved is None:
                    note = (
                        f"Slide {count} (tile {tile}) is not next to the gap; the remaining "
                        "slides were skipped.\n"
                    )
                    break
                self._board = moved
                if self._board == _GOAL:
                    break
            if self._board == _GOAL:
                observation, reward, terminated = "Solved!\n" + self._render(), 1.0, True
            else:
                observation = f"{note}The board is now:\n{self._render()}"
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "board": list(self._board)}

    def solution(self) -> str:
        plan = self._plan
        chunks = [plan[i : i + 6] for i in range(0, len(plan), 6)]
        return "\n".join("\\boxed{" + " ".join(map(str, chunk)) + "}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
