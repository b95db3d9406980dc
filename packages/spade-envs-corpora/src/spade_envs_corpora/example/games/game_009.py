"""Knapsack: pick items of greatest total value whose total weight fits the capacity."""

import itertools
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class KnapsackEnv:
    """Single answer with retries: an optimal item set; a wrong one gets its weight and value.

    `_items` maps an item letter to its (weight, value).
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, num_items: int = 9, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.num_items = max(4, min(num_items, 12))  # brute force over 2^12 subsets at most
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        names = string.ascii_uppercase[: self.num_items]
        # Redraw until filling up by value per weight misses the optimum, so greed does not win.
        while True:
            self._items = {name: (rng.randint(2, 19), rng.randint(3, 40)) for name in names}
            total = sum(weight for weight, _ in self._items.values())
            self._capacity = int(total * rng.uniform(0.35, 0.5))
            self._best_set = max(
                (
                    subset
                    for size in range(len(names) + 1)
                    for subset in itertools.combinations(names, size)
                    if self._weight(subset) <= self._capacity
                ),
                key=self._value,
            )
            self._best = self._value(self._best_set)
            if self._greedy_value() < self._best:
                break
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = "\n".join(
            f"{name}: weight {weight}, value {value}"
            for name, (weight, value) in self._items.items()
        )
        observation = (
            f"You can carry at most {self._capacity} units of weight. The items are:\n{listing}\n"
            "Choose a set of items with total weight at most the capacity and the largest "
            "possible total value; each item can be taken once. Answer with the item letters, "
            f"for example \\boxed{{ACD}}. Any set with the best possible value wins. You have "
            f"{self.max_attempts} attempts within {self.max_turns} turns; a wrong answer is told "
            "its total weight and value."
        )
        return observation, self._info()

    def _greedy_value(self) -> int:
        weight = value = 0
        for item_weight, item_value in sorted(
            self._items.values(), key=lambda item: item[1] / item[0], reverse=True
        ):
            if weight + item_weight <= self._capacity:
                weight, value = weight + item_weight, value + item_value
        return value

    def _weight(self, subset) -> int:
        return sum(self._items[name][0] for name in subset)

    def _value(self, subset) -> int:
        return sum(self._items[name][1] for name in subset)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        letters = re.sub(r"[\s,;]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if (
            not letters
            or any(ch not in self._items for ch in letters)
            or len(set(letters)) < len(letters)
        ):
            observation = (
                "Answer with distinct item letters inside \\boxed{...}, for example \\boxed{ACD}."
            )
        else:
            weight, value = self._weight(letters), self._value(letters)
            if weight <= self._capacity and value == self._best:
                observation, reward, terminated = f"Optimal: value {value}!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                verdict = "over the capacity" if weight > self._capacity else "not the best value"
                observation = f"{letters}: weight {weight}, value {value}, {verdict}. " + (
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
        return f"\\boxed{{{''.join(self._best_set)}}}"

    def close(self) -> None:
        self._done = True
