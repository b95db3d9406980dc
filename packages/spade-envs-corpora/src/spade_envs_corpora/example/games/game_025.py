"""Four houses: deduce each house's colour, pet and drink from a list of clues."""

import functools
import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_CATEGORIES = [
    ("colour", ["red", "green", "blue", "white"]),
    ("pet", ["cat", "dog", "fish", "bird"]),
    ("drink", ["tea", "coffee", "milk", "juice"]),
]
_ITEMS = [item for _, items in _CATEGORIES for item in items]
_OWNER = {
    "red": "red house",
    "green": "green house",
    "blue": "blue house",
    "white": "white house",
    "cat": "cat owner",
    "dog": "dog owner",
    "fish": "fish owner",
    "bird": "bird owner",
    "tea": "tea drinker",
    "coffee": "coffee drinker",
    "milk": "milk drinker",
    "juice": "juice drinker",
}
_PART = re.compile(r"\s*(?:(\d)\s*[:=.)]\s*)?([a-z]+)[\s,]+([a-z]+)[\s,]+([a-z]+)\s*")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _holds(clue, pos):
    """pos[i] is the house (0-3) of item i of _ITEMS."""
    kind, a, b = clue
    if kind == "at":
        return pos[a] == b
    if kind == "not_at":
        return pos[a] != b
    if kind == "same":
        return pos[a] == pos[b]
    if kind == "differ":
        return pos[a] != pos[b]
    if kind == "left":
        return pos[a] + 1 == pos[b]
    if kind == "next":
        return abs(pos[a] - pos[b]) == 1
    return pos[a] < pos[b]  # "before"


def _describe(clue):
    kind, a, b = clue
    x = "The " + _OWNER[_ITEMS[a]]
    if kind == "at":
        return f"{x} is house {b + 1}."
    if kind == "not_at":
        return f"{x} is not house {b + 1}."
    y = "the " + _OWNER[_ITEMS[b]]
    if kind == "same":
        return f"{x} and {y} are the same house."
    if kind == "differ":
        return f"{x} and {y} are different houses."
    if kind == "left":
        return f"{x} is immediately left of {y}."
    if kind == "next":
        return f"{x} is next to {y}."
    return f"{x} is somewhere left of {y}."


@functools.lru_cache(maxsize=1)
def _all_positions():
    perms = list(itertools.permutations(range(4)))
    return tuple(a + b + c for a in perms for b in perms for c in perms)


def _random_true_clue(rng, pos):
    kind = rng.choice(["at", "not_at", "same", "same", "differ", "left", "next", "before"])
    a = rng.randrange(12)
    if kind == "at":
        return kind, a, pos[a]
    if kind == "not_at":
        return kind, a, rng.choice([h for h in range(4) if h != pos[a]])
    others = [b for b in range(12) if b // 4 != a // 4]
    fits = [b for b in others if _holds((kind, a, b), pos)]
    return (kind, a, rng.choice(fits)) if fits else None


class FourHousesEnv:
    """Few attempts: each wrong full assignment is told which clues it breaks."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        alive = list(_all_positions())
        rng.shuffle(alive)
        truth = alive[0]
        clues = []
        direct = 0
        while len(alive) > 1:
            best, best_alive = None, None
            for _ in range(3):
                clue = _random_true_clue(rng, truth)
                if clue is None or (clue[0] == "at" and direct >= 1) or clue in clues:
                    continue
                kept = [p for p in alive if _holds(clue, p)]
                if len(kept) < len(alive) and (best is None or len(kept) < len(best_alive)):
                    best, best_alive = clue, kept
            if best is not None:
                clues.append(best)
                direct += best[0] == "at"
                alive = best_alive
        rng.shuffle(clues)
        self._truth = truth
        self._clues = clues
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = "\n".join(f"{i + 1}. {_describe(c)}" for i, c in enumerate(clues))
        kinds = "; ".join(f"{name}s: {', '.join(items)}" for name, items in _CATEGORIES)
        observation = (
            "Four houses stand in a row, numbered 1 to 4 from left to right. Each house has one "
            f"colour, one pet and one drink, all different ({kinds}). Exactly one arrangement "
            f"fits all {len(clues)} clues:\n{listing}\n"
            "Answer with colour, pet and drink for houses 1 to 4, separated by ';', for example "
            "\\boxed{1: red cat tea; 2: green dog coffee; 3: blue fish milk; 4: white bird juice}."
            " A wrong arrangement is told which clues it breaks. You have "
            f"{self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def _parse(self, content):
        parts = content.lower().split(";")
        if len(parts) != 4:
            return None
        pos = [None] * 12
        for house, part in enumerate(parts):
            match = _PART.fullmatch(part)
            if not match or (match.group(1) and int(match.group(1)) != house + 1):
                return None
            for (_, items), word in zip(_CATEGORIES, match.groups()[1:], strict=True):
                if word not in items or pos[_ITEMS.index(word)] is not None:
                    return None
                pos[_ITEMS.index(word)] = house
        return tuple(pos)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        pos = self._parse(_last_boxed(action) or "")
        reward, terminated = 0.0, False
        if pos is None:
            observation = (
                "Give houses 1 to 4 as 'colour pet drink', separated by ';', inside \\boxed{...}, "
                "using every colour, pet and drink once, for example \\boxed{1: red cat tea; "
                "2: green dog coffee; 3: blue fish milk; 4: white bird juice}."
            )
        else:
            broken = [str(i + 1) for i, c in enumerate(self._clues) if not _holds(c, pos)]
            if not broken:
                observation, reward, terminated = "Every clue holds. You win!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"That arrangement breaks clue(s) {', '.join(broken)}. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        houses = []
        for house in range(4):
            words = [_ITEMS[i] for i in range(12) if self._truth[i] == house]
            houses.append(f"{house + 1}: " + " ".join(words))
        return "\\boxed{" + "; ".join(houses) + "}"

    def close(self) -> None:
        self._done = True
