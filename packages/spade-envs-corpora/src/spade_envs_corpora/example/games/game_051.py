"""Delivery tour: the shortest round trip through eight towns, with feedback on each tour."""

import itertools
import math
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _length(dist, tour):
    return sum(dist[a][b] for a, b in zip(tour, tour[1:] + tour[:1], strict=True))


def _nearest_neighbour(dist, names):
    tour = [names[0]]
    while len(tour) < len(names):
        here = tour[-1]
        tour.append(min((n for n in names if n not in tour), key=lambda n: dist[here][n]))
    return tour


class DeliveryTourEnv:
    """Tour submissions with feedback: each wrong tour gets its legs and its excess length.

    `_dist[a][b]` is the rounded straight-line distance between towns a and b.
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, num_towns: int = 8, max_attempts: int = 4, **kwargs):
        self.max_turns = max_turns
        self.num_towns = max(5, min(num_towns, 9))  # brute force over (n-1)! tours
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        names = list(string.ascii_uppercase[: self.num_towns])
        # Redraw until one tour (up to direction) is shortest and nearest-neighbour misses it.
        while True:
            spots = rng.sample([(x, y) for x in range(21) for y in range(21)], len(names))
            where = dict(zip(names, spots, strict=True))
            dist = {a: {b: round(math.dist(where[a], where[b])) for b in names} for a in names}
            lengths = sorted(
                (_length(dist, [names[0], *rest]), [names[0], *rest])
                for rest in itertools.permutations(names[1:])
                if rest[0] < rest[-1]  # each round trip once, not also reversed
            )
            (best, tour), runner_up = lengths[0], lengths[1][0]
            if runner_up > best and _length(dist, _nearest_neighbour(dist, names)) > best:
                break
        self._dist, self._best, self._tour = dist, best, tour
        self._turn = 0
        self._attempts = 0
        self._done = False
        spots_text = ", ".join(f"{n} ({x}, {y})" for n, (x, y) in where.items())
        header = "   " + " ".join(f"{n:>3}" for n in names)
        table = "\n".join(f"{a}  " + " ".join(f"{dist[a][b]:>3}" for b in names) for a in names)
        observation = (
            f"A van must visit each of the towns {names[0]}-{names[-1]} once and return to where "
            f"it started. The towns lie at {spots_text}; road lengths are the straight-line "
            f"distances rounded to whole numbers:\n{header}\n{table}\nAnswer a round trip as all "
            f"the town letters in visiting order, for example \\boxed{{{''.join(names)}}} (it "
            "returns from the last town to the first). The shortest possible round trip wins. "
            f"You have {self.max_attempts} attempts within {self.max_turns} turns; a longer trip "
            "is told its legs and how much longer than the shortest it is."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        tour = list(re.sub(r"[\s,;>\-]", "", _last_boxed(action) or "").upper())
        reward, terminated = 0.0, False
        if sorted(tour) != sorted(self._dist):
            observation = (
                "Answer with every town letter exactly once, in visiting order, inside "
                f"\\boxed{{...}}, for example \\boxed{{{''.join(sorted(self._dist))}}}."
            )
        else:
            length = _length(self._dist, tour)
            if length == self._best:
                observation = f"{''.join(tour)}: length {length}, the shortest possible!"
                reward, terminated = 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                legs = ", ".join(
                    f"{a}{b} {self._dist[a][b]}"
                    for a, b in zip(tour, tour[1:] + tour[:1], strict=True)
                )
                observation = (
                    f"{''.join(tour)}: legs {legs}; length {length}, which is "
                    f"{length - self._best} longer than the shortest. "
                    + ("No attempts left." if terminated else f"{left} attempt(s) left.")
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "attempts": getattr(self, "_attempts", 0)}

    def solution(self) -> str:
        return f"\\boxed{{{''.join(self._tour)}}}"

    def close(self) -> None:
        self._done = True
