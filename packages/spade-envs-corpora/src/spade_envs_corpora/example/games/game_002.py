"""Residue probing: find a hidden number by asking for its remainders modulo small numbers."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_SECRET_BOUND = 10_000
# Any three moduli up to 20 have a least common multiple of at most 6460, so even with the free
# remainder given at the start the player must ask at least three questions and combine them.
_MAX_MODULUS = 20


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class ResidueProbeEnv:
    """Multi-turn: query `secret mod k`, then name the secret (Chinese remainder theorem)."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._secret = rng.randrange(_SECRET_BOUND)
        clue = rng.randrange(2, _MAX_MODULUS + 1)  # one free remainder to start from
        self._turn = 0
        self._done = False
        observation = (
            f"I am thinking of a whole number S with 0 <= S < {_SECRET_BOUND}. Each turn you may "
            f"either ask for the remainder of S divided by k, for any integer 2 <= k <= "
            f"{_MAX_MODULUS}, by answering \\boxed{{mod k}} (for example \\boxed{{mod 7}}), or "
            "guess S by answering \\boxed{N} (for example \\boxed{1234}). A correct guess wins; "
            f"a wrong guess is only marked wrong. You have {self.max_turns} turns in total. "
            f"To start you off: S mod {clue} = {self._secret % clue}."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action)
        reward, terminated = 0.0, False
        query = re.fullmatch(r"mod\s*(-?\d+)", content or "", re.IGNORECASE)
        if query:
            k = int(query.group(1))
            if 2 <= k <= _MAX_MODULUS:
                observation = f"S mod {k} = {self._secret % k}."
            else:
                observation = f"k must be between 2 and {_MAX_MODULUS}; you asked for mod {k}."
        elif content is not None and re.fullmatch(r"-?\d+", content):
            if int(content) == self._secret:
                observation, reward, terminated = f"Correct, S = {self._secret}!", 1.0, True
            else:
                observation = f"{content} is not S."
        else:
            observation = (
                "Answer \\boxed{mod k} to ask for a remainder (2 <= k <= "
                f"{_MAX_MODULUS}) or \\boxed{{N}} to guess S."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        moduli = [19, 17, 16, 9]  # pairwise coprime, product 46512 > 10000
        return "\n".join([f"\\boxed{{mod {k}}}" for k in moduli] + [f"\\boxed{{{self._secret}}}"])

    def close(self) -> None:
        self._done = True
