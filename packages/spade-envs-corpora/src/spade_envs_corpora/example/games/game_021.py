"""Latin square fill: complete a 5 x 5 Latin square cell by cell; wrong placements are mistakes."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PLACEMENT = re.compile(r"\s*(\d+)\s*[, ]\s*(\d+)\s*[,= ]\s*(\d+)\s*")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _count_solutions(grid, n, limit=2):
    """Number of Latin completions of grid (0 marks an empty cell), stopping at limit."""
    empties = [(r, c) for r in range(n) for c in range(n) if grid[r][c] == 0]
    if not empties:
        return 1

    def options(r, c):
        used = set(grid[r]) | {grid[i][c] for i in range(n)}
        return [v for v in range(1, n + 1) if v not in used]

    best = min(empties, key=lambda cell: len(options(*cell)))
    total = 0
    for value in options(*best):
        grid[best[0]][best[1]] = value
        total += _count_solutions(grid, n, limit - total)
        grid[best[0]][best[1]] = 0
        if total >= limit:
            break
    return total


def _random_square(rng, n):
    rows = list(range(n))
    cols = list(range(n))
    symbols = list(range(1, n + 1))
    rng.shuffle(rows)
    rng.shuffle(cols)
    rng.shuffle(symbols)
    base = [[symbols[(rows[r] + cols[c]) % n] for c in range(n)] for r in range(n)]
    # A few random row/column-preserving "intercalate" swaps make squares beyond cyclic ones.
    for _ in range(30):
        r1, r2 = rng.sample(range(n), 2)
        c1, c2 = rng.sample(range(n), 2)
        a, b = base[r1][c1], base[r1][c2]
        if base[r2][c1] == b and base[r2][c2] == a:
            base[r1][c1], base[r1][c2], base[r2][c1], base[r2][c2] = b, a, a, b
    return base


class LatinFillEnv:
    """Multi-turn: place digits into a Latin square; each placement is checked at once."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, size: int = 5, max_mistakes: int = 3, **kwargs):
        self.max_turns = max_turns
        self.size = max(4, min(size, 6))
        self.max_mistakes = max_mistakes
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.size
        self._answer = _random_square(rng, n)
        grid = [row[:] for row in self._answer]
        cells = [(r, c) for r in range(n) for c in range(n)]
        rng.shuffle(cells)
        for r, c in cells:
            keep = grid[r][c]
            grid[r][c] = 0
            if _count_solutions([row[:] for row in grid], n) != 1:
                grid[r][c] = keep
        self._grid = grid
        self._turn = 0
        self._mistakes = 0
        self._done = False
        observation = (
            f"Fill this {n} x {n} Latin square: every row and every column must hold each of the "
            f"digits 1 to {n} exactly once. Rows are numbered 1 to {n} from the top, columns 1 to "
            f"{n} from the left; '.' is an empty cell.\n{self._render()}\n"
            "Each turn place one or more digits as row column digit triples separated by ';', "
            "for example \\boxed{1 3 4; 2 5 1} puts 4 in row 1, column 3 and 1 in row 2, column 5. "
            "Every placement is checked against the one completion of the puzzle: a wrong digit "
            f"is rejected and counts as a mistake, and {self.max_mistakes} mistakes lose. Fill "
            f"every cell within {self.max_turns} turns to win."
        )
        return observation, self._info()

    def _render(self):
        return "\n".join(" ".join(str(v) if v else "." for v in row) for row in self._grid)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        n = self.size
        content = _last_boxed(action)
        parts = [] if not content else content.split(";")
        matches = [_PLACEMENT.fullmatch(part) for part in parts]
        reward, terminated = 0.0, False
        if not parts or not all(matches) or len(parts) > n * n:
            observation = (
                "Give placements as row column digit triples inside \\boxed{...}, separated by "
                "';', for example \\boxed{1 3 4; 2 5 1}."
            )
        else:
            notes = []
            for match in matches:
                r, c, v = (int(g) for g in match.groups())
                if not (1 <= r <= n and 1 <= c <= n and 1 <= v <= n):
                    notes.append(f"({r}, {c}) = {v} is out of range; use numbers 1 to {n}.")
                elif self._grid[r - 1][c - 1]:
                    notes.append(f"Row {r}, column {c} is already filled.")
                elif self._answer[r - 1][c - 1] == v:
                    self._grid[r - 1][c - 1] = v
                    notes.append(f"Row {r}, column {c} = {v}: placed.")
                else:
                    self._mistakes += 1
                    notes.append(f"Row {r}, column {c} = {v}: wrong, rejected.")
                    if self._mistakes >= self.max_mistakes:
                        break
            observation = " ".join(notes[:12])
            if len(notes) > 12:
                observation += f" ({len(notes) - 12} more notes omitted.)"
            if all(all(row) for row in self._grid):
                observation += f"\n{self._render()}\nThe square is complete. You win!"
                reward, terminated = 1.0, True
            elif self._mistakes >= self.max_mistakes:
                observation += f" That is {self._mistakes} mistakes; you lose."
                terminated = True
            else:
                left = self.max_mistakes - self._mistakes
                observation += f"\n{self._render()}\nMistakes left: {left}."
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "mistakes": getattr(self, "_mistakes", 0)}

    def solution(self) -> str:
        lines = []
        for r, row in enumerate(self._grid):
            triples = [f"{r + 1} {c + 1} {self._answer[r][c]}" for c, v in enumerate(row) if v == 0]
            if triples:
                lines.append("\\boxed{" + "; ".join(triples) + "}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
