"""Round table: seat eight guests so every guest's seating wish is met."""

import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_GUESTS = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hal"]
_SEATS = len(_GUESTS)


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _holds(wish, pos):
    """pos[g] is the seat (0-7, clockwise) of guest g; Ada (guest 0) is always in seat 0."""
    kind, x, y = wish
    if kind == "seat":
        return pos[x] == y
    gap = (pos[x] - pos[y]) % _SEATS
    if kind == "next":
        return gap in (1, _SEATS - 1)
    if kind == "apart":
        return gap not in (1, _SEATS - 1)
    if kind == "opposite":
        return gap == _SEATS // 2
    if kind == "after":
        return gap == 1
    return gap in (2, _SEATS - 2)  # "two away"


def _describe(wish):
    kind, x, y = wish
    who = _GUESTS[x]
    if kind == "seat":
        return f"{who} wants seat {y + 1}."
    other = _GUESTS[y]
    if kind == "next":
        return f"{who} wants to sit next to {other}."
    if kind == "apart":
        return f"{who} refuses to sit next to {other}."
    if kind == "opposite":
        return f"{who} wants to sit directly opposite {other}."
    if kind == "after":
        return f"{who} wants the seat just clockwise of {other}."
    return f"{who} wants to sit two seats away from {other}, with one seat between them."


def _all_seatings():
    seatings = []
    for order in itertools.permutations(range(1, _SEATS)):
        pos = [0] * _SEATS
        for seat, guest in enumerate(order, start=1):
            pos[guest] = seat
        seatings.append(tuple(pos))
    return seatings


def _random_true_wish(rng, pos):
    kind = rng.choice(["seat", "next", "next", "apart", "opposite", "after", "after", "two"])
    x = rng.randrange(1, _SEATS) if kind == "seat" else rng.randrange(_SEATS)
    if kind == "seat":
        return kind, x, pos[x]
    fits = [y for y in range(_SEATS) if y != x and _holds((kind, x, y), pos)]
    return (kind, x, rng.choice(fits)) if fits else None


class RoundTableEnv:
    """Few attempts: a wrong seating is told which guests are unhappy, not which wish failed."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"logic_round_table:{seed}")
        alive = _all_seatings()
        truth = rng.choice(alive[1:])  # alive[0] is the seating shown as the example
        wishes, fixed = [], 0
        while len(alive) > 1:
            best, best_alive = None, None
            for _ in range(3):
                wish = _random_true_wish(rng, truth)
                if wish is None or wish in wishes or (wish[0] == "seat" and fixed >= 1):
                    continue
                kept = [p for p in alive if _holds(wish, p)]
                # keep the weakest wish that still rules something out: more, subtler wishes
                if len(kept) < len(alive) and (best is None or len(kept) > len(best_alive)):
                    best, best_alive = wish, kept
            if best is not None:
                wishes.append(best)
                fixed += best[0] == "seat"
                alive = best_alive
        rng.shuffle(wishes)
        self._truth = truth
        self._wishes = wishes
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = "\n".join(f"- {_describe(w)}" for w in wishes)
        observation = (
            f"Eight guests ({', '.join(_GUESTS)}) sit at a round table with seats 1 to 8 in "
            "clockwise order; seat 8 is next to seat 1 and seat 5 is opposite seat 1. The host "
            f"Ada always takes seat 1. Exactly one seating meets all {len(wishes)} wishes:\n"
            f"{listing}\nAnswer with the guests in seats 1 to 8, for example "
            "\\boxed{Ada Ben Cleo Dev Eli Fay Gus Hal}. A wrong seating is told which guests "
            "have a wish that is not met, but not which wish. You have "
            f"{self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def _parse(self, content):
        names = [w.capitalize() for w in re.split(r"[\s,;]+", content.strip()) if w]
        if sorted(names) != sorted(_GUESTS) or names[0] != "Ada":
            return None
        pos = [0] * _SEATS
        for seat, name in enumerate(names):
            pos[_GUESTS.index(name)] = seat
        return tuple(pos)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        pos = self._parse(_last_boxed(action) or "")
        reward, terminated = 0.0, False
        if pos is None:
            observation = (
                "Name all eight guests once each, in seat order 1 to 8 with Ada first, inside "
                "\\boxed{...}, for example \\boxed{Ada Ben Cleo Dev Eli Fay Gus Hal}."
            )
        else:
            unhappy = sorted({w[1] for w in self._wishes if not _holds(w, pos)})
            if not unhappy:
                observation, reward, terminated = "Every guest is happy. You win!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                names = ", ".join(_GUESTS[g] for g in unhappy)
                observation = f"Unhappy guests: {names}. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "attempts": getattr(self, "_attempts", 0)}

    def solution(self) -> str:
        order = sorted(range(_SEATS), key=lambda g: self._truth[g])
        return "\\boxed{" + " ".join(_GUESTS[g] for g in order) + "}"

    def close(self) -> None:
        self._done = True
