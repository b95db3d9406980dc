"""Piece fitting: rotate, mirror and slide a pentomino into its outline on a cluttered board."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SIZE = 10
# Chiral pentominoes, so that mirroring matters: F, L, N, P, Y and Z.
_PIECES = [
    ((0, 1), (0, 2), (1, 0), (1, 1), (2, 1)),
    ((0, 0), (1, 0), (2, 0), (3, 0), (3, 1)),
    ((0, 1), (1, 1), (2, 0), (2, 1), (3, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0)),
    ((0, 1), (1, 0), (1, 1), (2, 1), (3, 1)),
    ((0, 0), (0, 1), (1, 1), (2, 1), (2, 2)),
]
_SHIFTS = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _normal(cells):
    top = min(r for r, _ in cells)
    left = min(c for _, c in cells)
    return tuple(sorted((r - top, c - left) for r, c in cells))


def _turn(shape, command):
    """The shape after C (clockwise), A (anticlockwise) or F (mirror left-right)."""
    height = max(r for r, _ in shape) + 1
    width = max(c for _, c in shape) + 1
    if command == "C":
        return _normal([(c, height - 1 - r) for r, c in shape])
    if command == "A":
        return _normal([(width - 1 - c, r) for r, c in shape])
    return _normal([(r, width - 1 - c) for r, c in shape])


def _cells(state):
    shape, (top, left) = state
    return {(top + r, left + c) for r, c in shape}


def _apply(blocked, state, command):
    """The (shape, corner) after a command, or None when it leaves the board or hits a rock."""
    shape, (top, left) = state
    if command in _SHIFTS:
        dr, dc = _SHIFTS[command]
        nxt = (shape, (top + dr, left + dc))
    else:
        nxt = (_turn(shape, command), (top, left))
    cells = _cells(nxt)
    if any(not (0 <= r < _SIZE and 0 <= c < _SIZE) or (r, c) in blocked for r, c in cells):
        return None
    return nxt


def _plan(blocked, start, goal_cells):
    parents = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if _cells(state) == goal_cells:
            commands = []
            while parents[state] is not None:
                state, command = parents[state]
                commands.append(command)
            return "".join(reversed(commands))
        for command in "UDLRCAF":
            nxt = _apply(blocked, state, command)
            if nxt is not None and nxt not in parents:
                parents[nxt] = (state, command)
                queue.append(nxt)
    return None


class PieceFittingEnv:
    """Multi-turn: up to eight slide, rotate and mirror commands per turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, rocks: int = 14, commands_per_turn: int = 8, **kwargs):
        self.max_turns = max_turns
        self.rocks = rocks
        self.commands_per_turn = max(1, commands_per_turn)
        self._done = True
        self._turn = 0

    def _random_state(self, rng, blocked):
        shape = _normal(rng.choice(_PIECES))
        for _ in range(rng.randrange(4)):
            shape = _turn(shape, "C")
        if rng.random() < 0.5:
            shape = _turn(shape, "F")
        height = max(r for r, _ in shape) + 1
        width = max(c for _, c in shape) + 1
        corner = (rng.randrange(_SIZE - height + 1), rng.randrange(_SIZE - width + 1))
        return shape, corner

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        board = [(r, c) for r in range(_SIZE) for c in range(_SIZE)]
        while True:
            blocked = set(rng.sample(board, self.rocks))
            start = self._random_state(rng, blocked)
            goal_shape = start[0]
            # The outline is the same piece turned and/or mirrored: at least one of C, A, F.
            command = rng.choice("CAF")
            goal_shape = _turn(goal_shape, command)
            if command != "F" and rng.random() < 0.5:
                goal_shape = _turn(goal_shape, "F")
            height = max(r for r, _ in goal_shape) + 1
            width = max(c for _, c in goal_shape) + 1
            corner = (rng.randrange(_SIZE - height + 1), rng.randrange(_SIZE - width + 1))
            goal_cells = _cells((goal_shape, corner))
            if (_cells(start) | goal_cells) & blocked or _cells(start) & goal_cells:
                continue
            plan = _plan(blocked, start, goal_cells)
            if plan and 9 <= len(plan) <= 40:
                break
        self._blocked = blocked
        self._state = start
        self._goal = goal_cells
        self._plan = plan
        self._turn = 0
        self._done = False
        observation = (
            "A 10 x 10 board: P is a five-square piece, o marks the outline where it must fit, "
            "# is a rock and . is empty. Rows are numbered from the top and columns from the "
            "left, both from 0.\n"
            f"{self._render()}\n"
            "Commands: U, D, L, R slide the piece one square up, down, left or right; C turns it "
            "90 degrees clockwise, A turns it 90 degrees anticlockwise and F mirrors it left to "
            "right. Turning and mirroring keep the top-left corner of the piece's bounding box "
            "where it is. Each turn send one to "
            f"{self.commands_per_turn} commands, for example \\boxed{{CRRD}}. A command that "
            "would push any square of the piece off the board or onto a rock is refused and "
            "stops the rest of that turn's commands. Covering the outline exactly wins. You "
            f"have {self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        piece = _cells(self._state)
        rows = ["  " + "".join(str(c) for c in range(_SIZE))]
        for r in range(_SIZE):
            line = []
            for c in range(_SIZE):
                cell = (r, c)
                line.append(
                    "P"
                    if cell in piece
                    else "o"
                    if cell in self._goal
                    else "#"
                    if cell in self._blocked
                    else "."
                )
            rows.append(f"{r} " + "".join(line))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        commands = re.sub(r"[\s,]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[UDLRCAF]+", commands):
            observation = (
                "Send commands made of the letters U, D, L, R, C, A, F inside \\boxed{...}, "
                "e.g. \\boxed{CRRD}."
            )
        elif len(commands) > self.commands_per_turn:
            observation = (
                f"At most {self.commands_per_turn} commands per turn; none were run. "
                "Answer like \\boxed{CRRD}."
            )
        else:
            note = ""
            for count, command in enumerate(commands, start=1):
                nxt = _apply(self._blocked, self._state, command)
                if nxt is None:
                    note = (
                        f"Command {count} ({command}) is refused; the remaining commands were "
                        "skipped.\n"
                    )
                    break
                self._state = nxt
                if _cells(self._state) == self._goal:
                    break
            if _cells(self._state) == self._goal:
                observation, reward, terminated = "The piece fits!", 1.0, True
            else:
                observation = f"{note}The board is now:\n{self._render()}"
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "corner": list(self._state[1])}

    def solution(self) -> str:
        step = self.commands_per_turn
        chunks = [self._plan[i : i + step] for i in range(0, len(self._plan), step)]
        return "\n".join(f"\\boxed{{{chunk}}}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
