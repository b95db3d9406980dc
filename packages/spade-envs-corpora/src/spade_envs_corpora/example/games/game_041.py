"""Odd one out: one hidden number property holds for all but one number in every round."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ROUNDS = 6
_SIZE = 5
_NUMBERS = range(10, 100)


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _prime(n):
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


def _digits(n):
    return divmod(n, 10)


# The hidden property, fixed for the whole episode; the odd number fails it.
_PROPERTIES = [
    "even",
    "odd",
    "multiple of 3",
    "not a multiple of 3",
    "multiple of 4",
    "one more than a multiple of 4",
    "prime",
    "not prime",
    "perfect square",
    "even digit sum",
    "digit sum at least 10",
    "tens digit larger than units digit",
    "tens digit smaller than units digit",
    "both digits odd",
    "contains the digit 7",
    "at least 50",
]


def _holds(name, n):
    tens, units = _digits(n)
    checks = {
        "even": n % 2 == 0,
        "odd": n % 2 == 1,
        "multiple of 3": n % 3 == 0,
        "not a multiple of 3": n % 3 != 0,
        "multiple of 4": n % 4 == 0,
        "one more than a multiple of 4": n % 4 == 1,
        "prime": _prime(n),
        "not prime": not _prime(n),
        "perfect square": int(n**0.5) ** 2 == n,
        "even digit sum": (tens + units) % 2 == 0,
        "digit sum at least 10": tens + units >= 10,
        "tens digit larger than units digit": tens > units,
        "tens digit smaller than units digit": tens < units,
        "both digits odd": tens % 2 == 1 and units % 2 == 1,
        "contains the digit 7": 7 in (tens, units),
        "at least 50": n >= 50,
    }
    return checks[name]


def _round(rng, name):
    fits = [n for n in _NUMBERS if _holds(name, n)]
    misfits = [n for n in _NUMBERS if not _holds(name, n)]
    items = rng.sample(fits, _SIZE - 1) + [rng.choice(misfits)]
    rng.shuffle(items)
    odd = next(i for i, n in enumerate(items) if not _holds(name, n))
    return items, odd


class OddOneOutEnv:
    """Multi-turn: six rounds under one hidden property; at most one mistake is allowed."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_mistakes: int = 1, **kwargs):
        self.max_turns = max_turns
        self.max_mistakes = max_mistakes
        self._done = True
        self._turn = 0

    def _show(self, k):
        items = " ".join(str(n) for n in self._rounds[k][0])
        return f"Round {k + 1} of {_ROUNDS}: {items}"

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        name = rng.choice(_PROPERTIES)
        self._property = name
        example, example_odd = _round(rng, name)
        self._rounds = [_round(rng, name) for _ in range(_ROUNDS)]
        self._round = 0
        self._mistakes = 0
        self._turn = 0
        self._done = False
        observation = (
            "In every round five two-digit numbers are shown. Four of them share one hidden "
            "property of the number's value or its digits, and one does not: the odd one out. "
            f"The property is the same in all {_ROUNDS} rounds. Example round: "
            f"{' '.join(str(n) for n in example)}, where the odd one out was "
            f"{example[example_odd]}.\n"
            "Answer with the odd number's position 1-5 or the number itself, e.g. \\boxed{3} "
            "or \\boxed{47}; after each answer you are told which number it was. Win by "
            f"finishing all {_ROUNDS} rounds with at most {self.max_mistakes} mistake(s); a "
            f"mistake more loses. You have {self.max_turns} turns.\n" + self._show(0)
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        items, odd = self._rounds[self._round]
        choice = None
        if re.fullmatch(r"\d{1,2}", content):
            value = int(content)
            if 1 <= value <= _SIZE:
                choice = value - 1
            elif value in items:
                choice = items.index(value)
        reward, terminated = 0.0, False
        if choice is None:
            observation = (
                "Answer the odd number's position 1-5 or the number itself inside \\boxed{...}, "
                "e.g. \\boxed{3}. " + self._show(self._round)
            )
        else:
            if choice == odd:
                observation = f"Right, {items[odd]} was the odd one out."
            else:
                self._mistakes += 1
                observation = f"Wrong, the odd one out was {items[odd]}."
            self._round += 1
            if self._mistakes > self.max_mistakes:
                observation += " Too many mistakes: the game is lost."
                terminated = True
            elif self._round == _ROUNDS:
                observation += " All rounds done: you win!"
                reward, terminated = 1.0, True
            else:
                observation += " " + self._show(self._round)
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {
            "turn": self._turn,
            "round": getattr(self, "_round", 0),
            "mistakes": getattr(self, "_mistakes", 0),
        }

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{odd + 1}}}" for _, odd in self._rounds)

    def close(self) -> None:
        self._done = True
