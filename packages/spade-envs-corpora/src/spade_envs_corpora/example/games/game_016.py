"""Hidden base: work out the base of a numeral system from sums, then multiply in it."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_DIGITS = "0123456789ABCDEF"
_SUM = re.compile(r"([0-9A-Fa-f]+)\s*\+\s*([0-9A-Fa-f]+)")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _write(value, base):
    text = ""
    while True:
        value, digit = divmod(value, base)
        text = _DIGITS[digit] + text
        if value == 0:
            return text


def _read(text, base):
    """The value of a numeral in the base, or the first digit that the base does not have."""
    value = 0
    for char in text.upper():
        digit = _DIGITS.index(char)
        if digit >= base:
            return None, char
        value = value * base + digit
    return value, None


class HiddenBaseEnv:
    """Multi-turn: addition queries written in the hidden base, then one product to give."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"hidden-base:{seed}")
        base = rng.randint(6, 16)
        x = rng.randrange(base**2, base**3)
        y = rng.randrange(base + 1, base**2)
        self._base, self._x, self._y = base, _write(x, base), _write(y, base)
        self._answer = _write(x * y, base)
        self._turn = 0
        self._attempts = 0
        self._done = False
        observation = (
            "Numbers here are written in a hidden base between 6 and 16, with digits "
            "0-9 and then A-F for ten to fifteen.\n"
            f"Goal: give the product {self._x} * {self._y}, written in the same hidden base, "
            "as \\boxed{...}, for example \\boxed{3A07}.\n"
            "Each turn you may instead ask for a sum: \\boxed{25 + 17} (two numerals in the "
            "hidden base) is answered with their sum in the hidden base; a digit the base does "
            f"not have is pointed out. You have {self.max_attempts} attempts at the product "
            f"within {self.max_turns} turns; a wrong product is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        query = _SUM.fullmatch(content)
        reward, terminated = 0.0, False
        if query and max(len(query.group(1)), len(query.group(2))) <= 8:
            (a, bad_a), (b, bad_b) = (_read(query.group(k), self._base) for k in (1, 2))
            if bad_a or bad_b:
                observation = f"The digit {bad_a or bad_b} does not exist in this base."
            else:
                total = _write(a + b, self._base)
                observation = f"{query.group(1).upper()} + {query.group(2).upper()} = {total}."
        elif re.fullmatch(r"[0-9A-Fa-f]{1,12}", content):
            guess = content.upper().lstrip("0") or "0"
            if guess == self._answer:
                observation, reward, terminated = "Correct product!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"{content.upper()} is not the product. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{A + B} with two numerals of the hidden base to ask for a sum, or "
                "\\boxed{...} with the product written in the hidden base (digits 0-9, A-F)."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        # 5 + 5 reads "1d" for base 10 - d below ten; from ten up, 9 + 9 reads "1d" for 18 - d.
        lines = ["\\boxed{5 + 5}"] + (["\\boxed{9 + 9}"] if self._base >= 10 else [])
        return "\n".join(lines + [f"\\boxed{{{self._answer}}}"])

    def close(self) -> None:
        self._done = True
