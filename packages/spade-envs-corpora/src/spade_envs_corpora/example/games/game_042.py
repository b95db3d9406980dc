"""Repeating unit: a long symbol stream repeats one hidden block; read symbols far away."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SYMBOLS = "ABCD"
_WINDOW = 8
_MAX_START = 1000
_TARGETS = 5


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class RepeatingUnitEnv:
    """Multi-turn: look at short windows of a periodic stream, then name far-away symbols."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def _at(self, position):
        return self._unit[(position - 1) % len(self._unit)]

    def _window(self, start):
        return "".join(self._at(p) for p in range(start, start + _WINDOW))

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            length = rng.randint(7, 16)
            unit = "".join(rng.choice(_SYMBOLS) for _ in range(length))
            if unit not in (unit + unit)[1:-1]:  # primitive: not a repeat of a shorter block
                break
        self._unit = unit
        self._positions = sorted(rng.sample(range(10**8, 10**9), _TARGETS))
        self._answer = "".join(self._at(p) for p in self._positions)
        self._turn = 0
        self._wrong = 0
        self._done = False
        places = ", ".join(f"{p:,}".replace(",", "_") for p in self._positions)
        observation = (
            f"An endless stream of the symbols {', '.join(_SYMBOLS)} is one hidden block of "
            "between 7 and 16 symbols repeated over and over, starting at position 1. Positions "
            f"1-{_WINDOW} read {self._window(1)}.\n"
            f"Each turn you may look at the {_WINDOW} symbols starting at any position N from 1 "
            f"to {_MAX_START} by answering \\boxed{{show N}}, e.g. \\boxed{{show 9}}.\n"
            f"Goal: give the symbols at positions {places} (underscores group the digits) in "
            "that order as one word, e.g. \\boxed{answer ABCDA}. You have "
            f"{self.max_answers} answers and {self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        show = re.fullmatch(r"SHOW\s+(\d{1,7})", content)
        answer = re.fullmatch(r"ANSWER\s+([A-Z]+)", content)
        reward, terminated = 0.0, False
        if show:
            start = int(show.group(1))
            if 1 <= start <= _MAX_START:
                end = start + _WINDOW - 1
                observation = f"Positions {start}-{end} read {self._window(start)}."
            else:
                observation = f"N must be from 1 to {_MAX_START}, e.g. \\boxed{{show 9}}."
        elif answer and len(answer.group(1)) == _TARGETS:
            if answer.group(1) == self._answer:
                observation, reward, terminated = "Correct!", 1.0, True
            else:
                self._wrong += 1
                left = self.max_answers - self._wrong
                terminated = left <= 0
                observation = f"{answer.group(1)} is wrong. " + (
                    "No answers left." if terminated else f"{left} answer(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{show N} to look at a window, or \\boxed{answer ABCDA} with the "
                f"{_TARGETS} symbols asked for."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        # Positions 1-32 hold two full copies of any block of up to 16 symbols.
        shows = [f"\\boxed{{show {start}}}" for start in (9, 17, 25)]
        return "\n".join(shows + [f"\\boxed{{answer {self._answer}}}"])

    def close(self) -> None:
        self._done = True
