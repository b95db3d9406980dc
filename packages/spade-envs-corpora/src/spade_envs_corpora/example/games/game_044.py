"""Growth rules: learn the hidden letter-rewriting rules of a growing word, then grow it."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ALPHABET = "ABC"
_MIN_QUERY, _MAX_QUERY = 2, 4
_GENERATIONS = 3


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class GrowthRulesEnv:
    """Multi-turn: grow chosen words one generation, then predict a word three generations on."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def _grow(self, word):
        return "".join(self._rules[ch] for ch in word)

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            self._rules = {
                ch: "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 3)))
                for ch in _ALPHABET
            }
            lengths = sorted(len(r) for r in self._rules.values())
            if lengths[-1] >= 2 and lengths[-2] >= 2:
                break
        self._start = "".join(rng.choice(_ALPHABET) for _ in range(3))
        word = self._start
        for _ in range(_GENERATIONS):
            word = self._grow(word)
        self._answer = word
        example = "".join(rng.choice(_ALPHABET) for _ in range(3))
        self._turn = 0
        self._wrong = 0
        self._done = False
        observation = (
            "A word over the letters A, B, C grows in generations: each generation, every letter "
            "is replaced at the same time by its own fixed, hidden word of 1 to 3 letters (the "
            f"same replacement wherever that letter stands). For example {example} grows in one "
            f"generation into {self._grow(example)}.\n"
            f"Each turn you may grow any word of {_MIN_QUERY} to {_MAX_QUERY} letters by one "
            "generation by answering \\boxed{grow WORD}, e.g. \\boxed{grow ABCA}.\n"
            f"Goal: give the word that {self._start} becomes after {_GENERATIONS} generations, "
            f"as \\boxed{{answer WORD}}. You have {self.max_answers} answers and "
            f"{self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        grow = re.fullmatch(r"GROW\s+([A-Z]+)", content)
        answer = re.fullmatch(r"ANSWER\s+([A-Z]+)", content)
        reward, terminated = 0.0, False
        if grow:
            word = grow.group(1)
            if set(word) <= set(_ALPHABET) and _MIN_QUERY <= len(word) <= _MAX_QUERY:
                observation = f"{word} grows into {self._grow(word)}."
            else:
                observation = (
                    f"Grow a word of {_MIN_QUERY} to {_MAX_QUERY} letters from A, B, C, e.g. "
                    "\\boxed{grow ABCA}."
                )
        elif answer:
            if answer.group(1) == self._answer:
                observation, reward, terminated = "Correct!", 1.0, True
            else:
                self._wrong += 1
                left = self.max_answers - self._wrong
                terminated = left <= 0
                observation = "That word is wrong. " + (
                    "No answers left." if terminated else f"{left} answer(s) left."
                )
        else:
            observation = (
                "Answer \\boxed{grow WORD} to grow a word one generation, or \\boxed{answer WORD} "
                f"with {self._start} after {_GENERATIONS} generations."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        # A doubled letter grows into its replacement written twice, so the split is plain.
        grows = [f"\\boxed{{grow {ch * 2}}}" for ch in _ALPHABET]
        return "\n".join(grows + [f"\\boxed{{answer {self._answer}}}"])

    def close(self) -> None:
        self._done = True
