"""Alien numerals: crack a hidden base and digit alphabet from translations of chosen numbers."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_POOL = "BCDFGHJKLMNPQRSTVWXZ"
_MAX_QUERY = 9999
_TARGET_DIGITS = 6


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class AlienNumeralsEnv:
    """Multi-turn: ask how numbers are written, then read an alien numeral in decimal."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def _write(self, n):
        digits = []
        while True:
            n, d = divmod(n, self._base)
            digits.append(self._symbols[d])
            if n == 0:
                return "".join(reversed(digits))

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._base = rng.randint(3, 9)
        self._symbols = rng.sample(_POOL, self._base)
        low, high = self._base ** (_TARGET_DIGITS - 1), self._base**_TARGET_DIGITS
        self._answer = rng.randrange(low, high)
        self._numeral = self._write(self._answer)
        example = rng.randint(100, 999)
        self._turn = 0
        self._wrong = 0
        self._done = False
        observation = (
            "Aliens write whole numbers in place-value notation in a hidden base between 3 and "
            "9, using one letter per digit value (the letter-to-value assignment is scrambled), "
            f"without leading zeros. For example they write {example} as {self._write(example)}.\n"
            f"Each turn you may ask how they write a number from 0 to {_MAX_QUERY} by answering "
            "\\boxed{write N}, e.g. \\boxed{write 25}.\n"
            f"Goal: give the decimal value of the alien numeral {self._numeral} by answering "
            f"\\boxed{{answer N}}. You have {self.max_answers} answers and {self.max_turns} "
            "turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").lower()
        write = re.fullmatch(r"write\s+(\d{1,6})", content)
        answer = re.fullmatch(r"answer\s+(\d{1,9})", content)
        reward, terminated = 0.0, False
        if write:
            n = int(write.group(1))
            if n <= _MAX_QUERY:
                observation = f"They write {n} as {self._write(n)}."
            else:
                observation = f"N must be from 0 to {_MAX_QUERY}, e.g. \\boxed{{write 25}}."
        elif answer:
            if int(answer.group(1)) == self._answer:
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
                "Answer \\boxed{write N} to see how a number is written, or \\boxed{answer N} "
                f"with the decimal value of {self._numeral}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        writes = [f"\\boxed{{write {d}}}" for d in range(self._base)]
        return "\n".join(writes + [f"\\boxed{{answer {self._answer}}}"])

    def close(self) -> None:
        self._done = True
