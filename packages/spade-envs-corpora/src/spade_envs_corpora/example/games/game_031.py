"""Battleship: sink a hidden fleet on an 8 x 8 grid with salvos of three shots per turn."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SIZE = 8
_COLUMNS = "ABCDEFGH"
_FLEET = (4, 3, 3, 2)


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _place_fleet(rng):
    """Ships as lists of (row, column); no two ships touch, not even at a corner."""
    while True:
        ships, blocked = [], set()
        for length in _FLEET:
            options = []
            for r in range(_SIZE):
                for c in range(_SIZE):
                    for dr, dc in ((0, 1), (1, 0)):
                        cells = [(r + dr * i, c + dc * i) for i in range(length)]
                        if all(0 <= x < _SIZE and 0 <= y < _SIZE for x, y in cells) and not (
                            set(cells) & blocked
                        ):
                            options.append(cells)
            if not options:
                break
            cells = rng.choice(options)
            ships.append(cells)
            for x, y in cells:
                blocked.update((x + a, y + b) for a in (-1, 0, 1) for b in (-1, 0, 1))
        if len(ships) == len(_FLEET):
            return ships


def _name(cell):
    return f"{_COLUMNS[cell[1]]}{cell[0] + 1}"


class BattleshipEnv:
    """Multi-turn: each salvo of up to three shots reports hits, misses and sunk ships."""

    skill = "Spatial"

    def __init__(self, max_turns: int = 10, shots_per_turn: int = 3, **kwargs):
        self.max_turns = max_turns
        self.shots_per_turn = max(1, shots_per_turn)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._ships = _place_fleet(rng)
        occupied = {cell for ship in self._ships for cell in ship}
        water = [(r, c) for r in range(_SIZE) for c in range(_SIZE) if (r, c) not in occupied]
        # A scout's three free misses make every episode's first view different.
        self._shots = {cell: "o" for cell in rng.sample(water, 3)}
        self._turn = 0
        self._done = False
        observation = (
            "A fleet is hidden on an 8 x 8 grid: one ship of length 4, two of length 3 and one "
            "of length 2, each lying straight along a row or a column. No two ships touch, not "
            "even diagonally. Columns are A to H from the left and rows 1 to 8 from the top, so "
            "a cell is named like C5. A scout has already fired three free shots, all misses.\n"
            f"{self._render()}\n"
            f"Each turn fire a salvo of one to {self.shots_per_turn} shots, for example "
            "\\boxed{B2 E5 G7}; each shot reports hit or miss, and when every cell of a ship has "
            "been hit it is reported sunk. Sinking the whole fleet wins. You have "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def _render(self) -> str:
        rows = ["  " + " ".join(_COLUMNS)]
        for r in range(_SIZE):
            marks = [self._shots.get((r, c), ".") for c in range(_SIZE)]
            rows.append(f"{r + 1} " + " ".join(marks))
        return "\n".join(rows) + "\n(X hit, o miss, . not fired at)"

    def _sunk(self, ship):
        return all(self._shots.get(cell) == "X" for cell in ship)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        names = re.findall(r"[A-H][1-8]", content)
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[A-H][1-8]([\s,]+[A-H][1-8])*", content):
            observation = (
                "Name the cells to fire at, like C5, separated by spaces inside \\boxed{...}, "
                "e.g. \\boxed{B2 E5 G7}."
            )
        elif len(names) > self.shots_per_turn:
            observation = (
                f"At most {self.shots_per_turn} shots per turn; nothing was fired. "
                "Answer like \\boxed{B2 E5 G7}."
            )
        else:
            reports = []
            for name in names:
                cell = (int(name[1]) - 1, _COLUMNS.index(name[0]))
                ship = next((s for s in self._ships if cell in s), None)
                was_sunk = ship is not None and self._sunk(ship)
                self._shots[cell] = "X" if ship else "o"
                if ship is None:
                    reports.append(f"{name} miss")
                elif not was_sunk and self._sunk(ship):
                    reports.append(f"{name} hit, a ship of length {len(ship)} is sunk")
                else:
                    reports.append(f"{name} hit")
            if all(self._sunk(ship) for ship in self._ships):
                observation, reward, terminated = "; ".join(reports) + ". Fleet sunk!", 1.0, True
            else:
                left = sum(not self._sunk(ship) for ship in self._ships)
                observation = (
                    "; ".join(reports) + f". {left} ship(s) still afloat.\n" + self._render()
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += "\nThe turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "shots": len(self._shots)}

    def solution(self) -> str:
        cells = sorted(cell for ship in self._ships for cell in ship)
        step = self.shots_per_turn
        chunks = [cells[i : i + step] for i in range(0, len(cells), step)]
        return "\n".join("\\boxed{" + " ".join(map(_name, chunk)) + "}" for chunk in chunks)

    def close(self) -> None:
        self._done = True
