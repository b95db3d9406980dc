"""Balance weights: recover five hidden weights from weighings of three items at a time."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NAMES = "ABCDE"
_WEIGH = re.compile(r"(?:weigh\s*)?([A-Ea-e])\s*,?\s*([A-Ea-e])\s*,?\s*([A-Ea-e])", re.IGNORECASE)
_PAIR = re.compile(r"([A-Ea-e])\s*=\s*(-?\d+)")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _parse_weights(content):
    """Five weights in the order A-E from 'A=3, B=7, ...' or '3, 7, ...'; None otherwise."""
    pairs = _PAIR.findall(content)
    if pairs and re.fullmatch(r"(?:\s*[A-Ea-e]\s*=\s*-?\d+\s*[,;]?)+", content):
        named = {name.upper(): int(value) for name, value in pairs}
        if len(pairs) == 5 and set(named) == set(_NAMES):
            return [named[name] for name in _NAMES]
        return None
    if re.fullmatch(r"-?\d+(?:\s*[, ]\s*-?\d+){4}", content):
        return [int(v) for v in re.findall(r"-?\d+", content)]
    return None


class BalanceWeightsEnv:
    """Multi-turn: each weighing of three distinct items reports their total weight."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"balance-weights:{seed}")
        self._weights = {name: rng.randint(1, 40) for name in _NAMES}
        first = "".join(sorted(rng.sample(_NAMES, 3)))
        second = first
        while second == first:
            second = "".join(sorted(rng.sample(_NAMES, 3)))
        self._turn = 0
        self._attempts = 0
        self._done = False
        observation = (
            "Five items A, B, C, D, E each have a hidden whole-number weight from 1 to 40 grams. "
            "The scale only works with exactly three different items on it at once, and "
            "shows their total weight. Each turn you may weigh three items by answering "
            "\\boxed{weigh ABD} (any three different letters), or give all five weights as "
            "\\boxed{A=3, B=7, C=12, D=5, E=9}.\n"
            f"Two first weighings: {', '.join(first)} showed {self._total(first)} grams, and "
            f"{', '.join(second)} showed {self._total(second)} grams.\n"
            f"You have {self.max_attempts} attempts at the five weights within "
            f"{self.max_turns} turns; a wrong set is only marked wrong."
        )
        return observation, self._info()

    def _total(self, names):
        return sum(self._weights[name] for name in names)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        weigh = _WEIGH.fullmatch(content)
        guess = _parse_weights(content)
        reward, terminated = 0.0, False
        if weigh:
            names = [g.upper() for g in weigh.groups()]
            if len(set(names)) == 3:
                observation = f"{', '.join(names)} together weigh {self._total(names)} grams."
            else:
                observation = "The scale needs three different items, as in \\boxed{weigh ABD}."
        elif guess is not None:
            if guess == [self._weights[name] for name in _NAMES]:
                observation, reward, terminated = "All five weights are right!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = "Those weights are not all right. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{weigh XYZ} with three different letters from A-E, or "
                "\\boxed{A=.., B=.., C=.., D=.., E=..} with all five weights."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        # The five cyclic triples ABC, BCD, CDE, DEA, EAB give an invertible system: their
        # sum is three times the whole, and two triples sharing one item add up to the whole plus it.
        triples = ["ABC", "BCD", "CDE", "DEA", "EAB"]
        lines = [f"\\boxed{{weigh {t}}}" for t in triples]
        answer = ", ".join(f"{name}={self._weights[name]}" for name in _NAMES)
        return "\n".join(lines + [f"\\boxed{{{answer}}}"])

    def close(self) -> None:
        self._done = True
