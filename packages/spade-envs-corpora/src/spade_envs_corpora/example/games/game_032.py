"""Heading robot: steer a robot that turns left or right and drives forward to a docking pose."""

import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SIZE = 8
_HEADINGS = "NESW"
_DELTAS = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
_ARROWS = {"N": "^", "E": ">", "S": "v", "W": "<"}
_WORDS = {"N": "north (up)", "E": "east (right)", "S": "south (down)", "W": "west (left)"}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _apply(blocked, pose, command):
    """The pose after one command, or None when driving forward would crash."""
    r, c, h = pose
    if command == "L":
        return (r, c, _HEADINGS[(_HEADINGS.index(h) - 1) % 4])
    if command == "R":
        return (r, c, _HEADINGS[(_HEADINGS.index(h) + 1) % 4])
    dr, dc = _DELTAS[h]
    nr, nc = r + dr, c + dc
    if not (0 <= nr < _SIZE and 0 <= nc < _SIZE) or (nr, nc) in blocked:
        return None
    return (nr, nc, h)


def _plans(blocked, start):
    """Shortest command strings from start to every reachable pose."""
    plans = {start: ""}
    queue = deque([start])
    while queue:
        pose = queue.popleft()
        for command in "FLR":
            nxt = _apply(blocked, pose, command)
            if nxt is not None and nxt not in plans:
                plans[nxt] = plans[pose] + command
                queue.append(nxt)
    return plans


class HeadingRobotEnv:
    """Multi-turn: up to six relative commands per turn; the robot's pose is shown each turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, rocks: int = 14, commands_per_turn: int = 6, **kwargs):
        self.max_turns = max_turns
        self.rocks = rocks
        self.commands_per_turn = max(1, commands_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        cells = [(r, c) for r in range(_SIZE) for c in range(_SIZE)]
        while True:
            picked = rng.sample(cells, self.rocks + 1)
            blocked, (sr, sc) = set(picked[:-1]), picked[-1]
            start = (sr, sc, rng.choice(_HEADINGS))
            plans = _plans(blocked, start)
            far = [p for p in plans if 16 <= len(plans[p]) <= 30]
            if far:
                goal = rng.choice(sorted(far))
                break
        self._blocked = blocked
        self._pose = start
        self._goal = goal
        self._plan = plans[goal]
        self._turn = 0
        self._done = False
        observation = (
            "A robot drives on an 8 x 8 yard; # is a rock, . is open ground, and the robot is "
            "drawn as an arrow showing the way it faces (^ north/up, > east/right, v south/down, "
            "< west/left). Rows are numbered 0 to 7 from the top and columns 0 to 7 from the "
            "left.\n"
            f"{self._render()}\n"
            f"The robot is at row {start[0]}, column {start[1]}, facing {_WORDS[start[2]]}. It "
            f"must dock at the square marked D (row {goal[0]}, column {goal[1]}) facing "
            f"{_WORDS[goal[2]]}.\n"
            "Commands are relative to the robot: L turns it 90 degrees left, R turns it 90 "
            "degrees right (both in place) and F drives one square forward. Each turn send one to "
            f"{self.commands_per_turn} commands, for example \\boxed{{FFRF}}. Driving into a rock "
            "or off the yard stops the rest of that turn's commands. Docking wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        rows = ["  " + "".join(str(c) for c in range(_SIZE))]
        for r in range(_SIZE):
            line = []
            for c in range(_SIZE):
                if (r, c) == self._pose[:2]:
                    line.append(_ARROWS[self._pose[2]])
                elif (r, c) == self._goal[:2]:
                    line.append("D")
                else:
                    line.append("#" if (r, c) in self._blocked else ".")
            rows.append(f"{r} " + "".join(line))
        return "\n".join(rows)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        commands = re.sub(r"[\s,]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[FLR]+", commands):
            observation = (
                "Send commands made of the letters F, L and R inside \\boxed{...}, "
                "e.g. \\boxed{FFRF}."
            )
        elif len(commands) > self.commands_per_turn:
            observation = (
                f"At most {self.commands_per_turn} commands per turn; none were run. "
                "Answer like \\boxed{FFRF}."
            )
        else:
            note = ""
            for count, command in enumerate(commands, start=1):
                nxt = _apply(self._blocked, self._pose, command)
                if nxt is None:
                    note = f"Command {count} (F) would crash; the remaining commands were skipped. "
                    break
                self._pose = nxt
                if self._pose == self._goal:
                    break
            if self._pose == self._goal:
                observation, reward, terminated = "Docked!", 1.0, True
            else:
                r, c, h = self._pose
                observation = (
                    f"{note}The robot is at row {r}, column {c}, facing {_WORDS[h]}.\n"
                    + self._render()
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "pose": list(self._pose)}

    def solution(self) -> str:
        step = self.commands_per_turn
        chunks = [self._plan[i : i + step] for i in range(0, len(self._plan), step)]
        return "\n".join(f"\\boxed{{{chunk}}}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
