"""Box pusher: a one-box Sokoban room; push the box onto the goal square."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_SIZE = 8  # including the outer wall


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _walk(walls, state, move):
    """The (player, box) state after one move, or None when the move is blocked."""
    player, box = state
    dr, dc = _MOVES[move]
    step = (player[0] + dr, player[1] + dc)
    if step in walls:
        return None
    if step == box:
        pushed = (box[0] + dr, box[1] + dc)
        if pushed in walls:
            return None
        return (step, pushed)
    return (step, box)


def _solve(walls, start, goal):
    """Shortest move string that puts the box on the goal, with its number of pushes."""
    parents = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[1] == goal:
            moves = []
            while parents[state] is not None:
                state, move = parents[state]
                moves.append(move)
            return "".join(reversed(moves))
        for move in "UDLR":
            nxt = _walk(walls, state, move)
            if nxt is not None and nxt not in parents:
                parents[nxt] = (state, move)
                queue.append(nxt)
    return None


class BoxPusherEnv:
    """Multi-turn: several moves per turn; walking into the box pushes it one square."""

    skill = "Spatial"

    def __init__(
        self, max_turns: int = 10, inner_walls: int = 6, moves_per_turn: int = 8, **kwargs
    ):
        self.max_turns = max_turns
        self.inner_walls = inner_walls
        self.moves_per_turn = max(1, moves_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        border = {
            (r, c)
            for r in range(_SIZE)
            for c in range(_SIZE)
            if r in (0, _SIZE - 1) or c in (0, _SIZE - 1)
        }
        inside = [(r, c) for r in range(1, _SIZE - 1) for c in range(1, _SIZE - 1)]
        while True:
            picked = rng.sample(inside, self.inner_walls + 3)
            walls = border | set(picked[: self.inner_walls])
            player, box, goal = picked[-3:]
            plan = _solve(walls, (player, box), goal)
            if not plan or len(plan) > 48:
                continue
            pushes = [m for i, m in enumerate(plan) if self._pushes(walls, player, box, plan, i)]
            # At least five pushes in two directions, so no short lucky walk wins.
            if len(pushes) >= 5 and len(set(pushes)) >= 2:
                break
        self._walls = walls
        self._state = (player, box)
        self._goal = goal
        self._plan = plan
        self._turn = 0
        self._done = False
        observation = (
            "A warehouse room: # is wall, . is floor, @ is you, B is the box and G the goal "
            "square. Rows are numbered from the top and columns from the left, both from 0.\n"
            f"{self._render()}\n"
            "Move with U (up), D (down), L (left) and R (right). Walking into the box pushes it "
            "one square the same way, if the square beyond it is free; you can only push, never "
            "pull. Each turn send one to "
            f"{self.moves_per_turn} moves, for example \\boxed{{RRDL}}. A blocked move stops the "
            "rest of that turn's moves. Pushing the box onto G wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    @staticmethod
    def _pushes(walls, player, box, plan, index):
        state = (player, box)
        for move in plan[:index]:
            state = _walk(walls, state, move)
        return _walk(walls, state, plan[index])[1] != state[1]

    def _render(self) -> str:
        player, box = self._state
        rows = ["  " + "".join(str(c) for c in range(_SIZE))]
        for r in range(_SIZE):
            line = []
            for c in range(_SIZE):
                cell = (r, c)
                line.append(
                    "@"
                    if cell == player
                    else "B"
                    if cell == box
                    else "G"
                    if cell == self._goal
                    else "#"
                    if cell in self._walls
                    else "."
                )
            rows.append(f"{r} " + "".join(line))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        moves = re.sub(r"[\s,]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[UDLR]+", moves):
            observation = "Send moves made of the letters U, D, L, R inside \\boxed{...}."
        elif len(moves) > self.moves_per_turn:
            observation = (
                f"At most {self.moves_per_turn} moves per turn; none were made. "
                "Answer like \\boxed{RRDL}."
            )
        else:
            note = ""
            for count, move in enumerate(moves, start=1):
                nxt = _walk(self._walls, self._state, move)
                if nxt is None:
                    note = f"Move {count} ({move}) is blocked; the remaining moves were skipped.\n"
                    break
                self._state = nxt
                if self._state[1] == self._goal:
                    break
            if self._state[1] == self._goal:
                observation, reward, terminated = "The box is on the goal!", 1.0, True
            else:
                observation = f"{note}The room is now:\n{self._render()}"
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "player": list(self._state[0]), "box": list(self._state[1])}

    def solution(self) -> str:
        step = self.moves_per_turn
        chunks = [self._plan[i : i + step] for i in range(0, len(self._plan), step)]
        return "\n".join(f"\\boxed{{{chunk}}}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
