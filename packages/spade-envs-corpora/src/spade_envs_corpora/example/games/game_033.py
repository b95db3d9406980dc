"""Tower shuffle: gather five disks from a scattered Tower of Hanoi position onto one peg."""

import itertools
import random
import re
from collections import deque

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PEGS = "ABC"


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _move(state, source, target):
    """state[d] is the peg of disk d+1 (disk 1 smallest); None when the move is illegal."""
    on_source = [d for d, peg in enumerate(state) if peg == source]
    if not on_source or source == target:
        return None
    disk = min(on_source)
    if any(peg == target and d < disk for d, peg in enumerate(state)):
        return None
    cells = list(state)
    cells[disk] = target
    return tuple(cells)


def _plans(start):
    """Shortest move lists from start to every position."""
    plans = {start: []}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for source, target in itertools.permutations(range(3), 2):
            nxt = _move(state, source, target)
            if nxt is not None and nxt not in plans:
                plans[nxt] = plans[state] + [_PEGS[source] + _PEGS[target]]
                queue.append(nxt)
    return plans


class TowerShuffleEnv:
    """Multi-turn: up to eight peg-to-peg moves per turn; the pegs are shown after each turn."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, disks: int = 5, moves_per_turn: int = 8, **kwargs):
        self.max_turns = max_turns
        self.disks = min(max(3, disks), 7)
        self.moves_per_turn = max(1, moves_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.disks
        target = rng.randrange(3)
        goal = (target,) * n
        plans = _plans(goal)  # moves are reversible, so distances from the goal are distances to it
        least = (2**n - 1) * 3 // 5
        start = rng.choice(sorted(s for s in plans if len(plans[s]) >= least))
        self._state = start
        self._goal = goal
        self._target = target
        self._plan = _plans(start)[goal]
        self._turn = 0
        self._done = False
        observation = (
            f"Three pegs A, B and C hold {n} disks numbered 1 (smallest) to {n} (largest). "
            "Each peg is listed from its bottom disk to its top disk:\n"
            f"{self._render()}\n"
            "A move takes the top disk of one peg and puts it on another peg, never on top of "
            "a smaller disk; write it as two letters, source then target, so AC moves the top "
            f"disk of A onto C. Goal: all {n} disks on peg {_PEGS[target]}. Each turn send one to "
            f"{self.moves_per_turn} moves in order, for example \\boxed{{AC AB CB}}. An illegal "
            "move stops the rest of that turn's moves. Reaching the goal wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        lines = []
        for peg, name in enumerate(_PEGS):
            disks = [str(d + 1) for d in range(self.disks - 1, -1, -1) if self._state[d] == peg]
            lines.append(f"{name}: " + (" ".join(disks) if disks else "(empty)"))
        return "\n".join(lines)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        moves = re.findall(r"[ABC]{2}", content)
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[ABC]{2}([\s,]+[ABC]{2})*", content):
            observation = (
                "Send moves like AC (source peg, then target peg) separated by spaces inside "
                "\\boxed{...}, e.g. \\boxed{AC AB CB}."
            )
        elif len(moves) > self.moves_per_turn:
            observation = (
                f"At most {self.moves_per_turn} moves per turn; none were made. "
                "Answer like \\boxed{AC AB CB}."
            )
        else:
            note = ""
            for count, move in enumerate(moves, start=1):
                nxt = _move(self._state, _PEGS.index(move[0]), _PEGS.index(move[1]))
                if nxt is None:
                    note = f"Move {count} ({move}) is illegal; the remaining moves were skipped.\n"
                    break
                self._state = nxt
                if self._state == self._goal:
                    break
            if self._state == self._goal:
                observation, reward, terminated = "All disks are gathered!", 1.0, True
            else:
                observation = f"{note}The pegs are now:\n{self._render()}"
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "state": list(self._state)}

    def solution(self) -> str:
        step = self.moves_per_turn
        chunks = [self._plan[i : i + step] for i in range(0, len(self._plan), step)]
        return "\n".join("\\boxed{" + " ".join(chunk) + "}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
