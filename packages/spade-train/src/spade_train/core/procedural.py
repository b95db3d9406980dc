"""Hand-written procedural environments with adaptive difficulty: a dependency-free CPU smoke
baseline (``mode: fixed-procedural``). The real RLVE baseline is ``mode: fixed-rlve``
(:mod:`spade_train.core.rlve_source`, RLVE's own environments from ``rlve-gym``).

Each generator (the names follow reasoning-gym's task families) turns a difficulty level into
the source of a self-contained environment (the same contract as designer-written ones, played
in the same sandbox): a question, an answer in ``\\boxed{...}``, two attempts. The
:class:`ProceduralCurriculum` raises a generator's level when the agent's unhinted win rate in
its environments is above the target band and lowers it when below.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from spade_train.core.pool import PoolEntry

MIN_LEVEL, MAX_LEVEL = 1, 10

# One ``_make(rng, level) -> (question, answer)`` per generator, with its skill and hint.
_GENERATORS: dict[str, tuple[str, str, str]] = {
    "basic_arithmetic": (
        "Math",
        "Evaluate multiplication before addition and subtraction, then add the terms left to "
        "right, writing each partial result down.",
        """
        def _make(rng, level):
            nums = [rng.randint(1, 10 * level) for _ in range(level + 1)]
            ops = [rng.choice("+-*") for _ in range(level)]
            text = str(nums[0]) + "".join(f" {o} {n}" for o, n in zip(ops, nums[1:]))
            terms, signs = [nums[0]], [1]
            for o, n in zip(ops, nums[1:]):
                if o == "*":
                    terms[-1] *= n
                else:
                    terms.append(n)
                    signs.append(1 if o == "+" else -1)
            return f"Compute {text}.", str(sum(s * t for s, t in zip(signs, terms)))
        """,
    ),
    "chain_sum": (
        "Math",
        "Add the numbers one at a time, keeping a running total, and check the sign of each.",
        """
        def _make(rng, level):
            nums = [rng.randint(-(10 ** min(level, 6)), 10 ** min(level, 6)) for _ in range(level + 2)]
            return "Compute the sum " + " + ".join(f"({n})" for n in nums) + ".", str(sum(nums))
        """,
    ),
    "leg_counting": (
        "Math",
        "Multiply each animal count by its legs (birds 2, cats/dogs/cows 4, spiders 8, insects "
        "6) and add the products.",
        """
        _LEGS = {"chicken": 2, "duck": 2, "cat": 4, "dog": 4, "cow": 4, "spider": 8, "ant": 6, "beetle": 6}
        def _make(rng, level):
            kinds = rng.sample(sorted(_LEGS), min(len(_LEGS), level + 1))
            counts = {k: rng.randint(1, 2 * level + 1) for k in kinds}
            text = ", ".join(f"{c} {k}{'s' if c > 1 else ''}" for k, c in counts.items())
            total = sum(_LEGS[k] * c for k, c in counts.items())
            return f"A farm has {text}. How many legs are there in total?", str(total)
        """,
    ),
    "number_sorting": (
        "Pattern",
        "Repeatedly pick the smallest remaining number and cross it out; negatives come first.",
        """
        def _make(rng, level):
            nums = rng.sample(range(-20 * level, 20 * level + 1), level + 3)
            answer = ",".join(str(n) for n in sorted(nums))
            return "Sort ascending, comma-separated: " + ", ".join(map(str, nums)) + ".", answer
        """,
    ),
    "word_sorting": (
        "Pattern",
        "Compare words letter by letter from the first; a word that is a prefix of another "
        "comes first.",
        """
        _WORDS = ("apple", "bread", "chair", "delta", "eagle", "fable", "grape", "house",
                  "igloo", "joker", "kite", "lemon", "mango", "night", "ocean", "piano",
                  "quilt", "river", "stone", "tiger", "umbra", "vivid", "water", "xenon",
                  "yacht", "zebra", "amber", "basil", "cedar", "dune")
        def _make(rng, level):
            words = rng.sample(_WORDS, min(len(_WORDS), level + 3))
            answer = ",".join(sorted(words))
            return "Sort alphabetically, comma-separated: " + ", ".join(words) + ".", answer
        """,
    ),
    "letter_counting": (
        "Pattern",
        "Go through the text word by word and keep a tally of the letter, upper and lower case "
        "alike.",
        """
        def _make(rng, level):
            letters = "abcdefghij"[: 3 + min(level, 7)]
            words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 6)))
                     for _ in range(2 + 2 * level)]
            target = rng.choice(letters)
            count = sum(w.count(target) for w in words)
            return f"How many times does the letter '{target}' occur in: {' '.join(words)}?", str(count)
        """,
    ),
    "gcd": (
        "Math",
        "Use Euclid's algorithm: replace the larger number by its remainder modulo the smaller "
        "until one is zero.",
        """
        import math
        def _make(rng, level):
            g = rng.randint(1, 5 * level)
            a, b = g * rng.randint(1, 10 * level), g * rng.randint(1, 10 * level)
            return f"What is the greatest common divisor of {a} and {b}?", str(math.gcd(a, b))
        """,
    ),
    "lcm": (
        "Math",
        "Divide the product of the two numbers by their greatest common divisor.",
        """
        import math
        def _make(rng, level):
            a, b = rng.randint(2, 6 * level + 4), rng.randint(2, 6 * level + 4)
            return f"What is the least common multiple of {a} and {b}?", str(a * b // math.gcd(a, b))
        """,
    ),
    "simple_equations": (
        "Math",
        "Move the constant to the other side first, then divide both sides by the coefficient.",
        """
        def _make(rng, level):
            x = rng.randint(-10 * level, 10 * level)
            a = rng.choice([k for k in range(-3 * level - 1, 3 * level + 2) if k not in (0,)])
            b = rng.randint(-20 * level, 20 * level)
            return f"Solve for x: {a}*x + ({b}) = {a * x + b}.", str(x)
        """,
    ),
    "base_conversion": (
        "Math",
        "Divide by the base repeatedly and read the remainders from last to first; digits "
        "above 9 are letters a, b, c, ...",
        """
        def _make(rng, level):
            n = rng.randint(1, 16 * level * level)
            base = rng.choice([2, 3, 5, 8, 16] if level < 5 else list(range(2, 17)))
            digits = ""
            m = n
            while m:
                digits = "0123456789abcdef"[m % base] + digits
                m //= base
            return f"Write the decimal number {n} in base {base}.", digits
        """,
    ),
}

_CLASS = '''
class ProceduralEnv:
    """A procedurally generated question with two attempts."""

    skill = SKILL

    def __init__(self, max_turns: int = 10, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        question, self._answer = _make(rng, LEVEL)
        self._turn = 0
        self._attempts = 0
        self._done = False
        return (
            f"{question} Answer as \\\\boxed{{...}}. You have {self.max_attempts} attempts "
            f"within {self.max_turns} turns.",
            {"level": LEVEL},
        )

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {"level": LEVEL}
        self._turn += 1
        found = re.findall(r"\\\\boxed\\{([^{}]*)\\}", str(action))
        reward, terminated = 0.0, False
        if not found or not found[-1].strip():
            observation = "Put your answer inside \\\\boxed{...}."
        elif _norm(found[-1]) == _norm(self._answer):
            observation, reward, terminated = "Correct!", 1.0, True
        else:
            self._attempts += 1
            terminated = self._attempts >= self.max_attempts
            observation = "Wrong." + (" No attempts left." if terminated else " Try again.")
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, {"level": LEVEL}

    def solution(self):
        return "\\\\boxed{" + self._answer + "}"

    def close(self):
        self._done = True


def _norm(text):
    return "".join(str(text).lower().split())
'''


@dataclass(frozen=True)
class ProceduralDesign:
    """One generated environment: source, class, hint, skill and the generator's name."""

    source: str
    class_name: str
    hint: str
    skill: str
    origin: str
    level: int


def generator_names() -> list[str]:
    """Names of the available generators."""
    return sorted(_GENERATORS)


def make_source(generator: str, level: int) -> ProceduralDesign:
    """The environment of ``generator`` at difficulty ``level`` (1..10)."""
    if generator not in _GENERATORS:
        raise ValueError(
            f"unknown procedural generator {generator!r}; choose from {', '.join(generator_names())}"
        )
    level = max(MIN_LEVEL, min(MAX_LEVEL, int(level)))
    skill, hint, make = _GENERATORS[generator]
    source = (
        f'"""Procedural {generator} environment, difficulty level {level}."""\n\n'
        "import random\nimport re\n\n"
        f"LEVEL = {level}\nSKILL = {skill!r}\n" + textwrap.dedent(make) + _CLASS
    )
    return ProceduralDesign(source, "ProceduralEnv", hint, skill, generator, level)


class ProceduralCurriculum:
    """Round-robin over ``generators``, each with a difficulty level kept inside the band."""

    def __init__(
        self,
        generators: list[str] | tuple[str, ...],
        target: tuple[float, float] = (0.3, 0.7),
        seed: int = 0,
        start_level: int = MIN_LEVEL,
    ) -> None:
        if not generators:
            raise ValueError("fixed.generators is empty; name at least one generator")
        unknown = [g for g in generators if g not in _GENERATORS]
        if unknown:
            raise ValueError(
                f"unknown procedural generator(s) {', '.join(unknown)}; "
                f"choose from {', '.join(generator_names())}"
            )
        low, high = target
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"target win-rate band must satisfy 0 <= low <= high <= 1: {target}")
        self.generators = list(generators)
        self.target = (float(low), float(high))
        self.seed = seed
        self.levels = {g: start_level for g in self.generators}
        self._next = seed % len(self.generators)

    def propose(self, n: int) -> list[ProceduralDesign]:
        """``n`` environments, cycling through the generators at their current levels."""
        out = []
        for _ in range(n):
            g = self.generators[self._next]
            self._next = (self._next + 1) % len(self.generators)
            out.append(make_source(g, self.levels[g]))
        return out

    def update(self, generator: str, win_rate: float | None) -> int | None:
        """Move ``generator``'s level one step toward the target band; returns the new level."""
        if generator not in self.levels or win_rate is None:
            return None
        low, high = self.target
        level = self.levels[generator]
        if win_rate > high:
            level = min(MAX_LEVEL, level + 1)
        elif win_rate < low:
            level = max(MIN_LEVEL, level - 1)
        self.levels[generator] = level
        return level

    def observe(self, entry: PoolEntry, returns: list[float]) -> None:
        """Update the level of ``entry``'s generator from its unhinted episode ``returns``."""
        wins = [float(r >= 1.0) for r in returns]
        self.update(entry.origin, sum(wins) / len(wins) if wins else None)

    def state_dict(self) -> dict[str, Any]:
        return {"levels": dict(self.levels), "next": self._next}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.levels = {g: int(state["levels"].get(g, MIN_LEVEL)) for g in self.generators}
        self._next = int(state["next"]) % len(self.generators)
