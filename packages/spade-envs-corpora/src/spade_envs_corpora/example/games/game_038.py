"""Automaton rule: identify a hidden elementary cellular automaton from chosen rows."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MIN_WIDTH, _MAX_WIDTH = 3, 6
_SAMPLE_WIDTH = 12
# Wolfram's order: the rule's bit for neighbourhood (left, cell, right) = 7 - (4l + 2c + r).
_ORDER = ["111", "110", "101", "100", "011", "010", "001", "000"]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _step_row(table, row):
    n = len(row)
    return "".join(table[row[i - 1] + row[i] + row[(i + 1) % n]] for i in range(n))


class AutomatonRuleEnv:
    """Multi-turn: evolve chosen cyclic rows one generation, then name the rule."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        self._rule = rng.randrange(1, 255)
        bits = format(self._rule, "08b")
        self._table = dict(zip(_ORDER, bits, strict=True))
        sample = "".join(rng.choice("01") for _ in range(_SAMPLE_WIDTH))
        self._turn = 0
        self._wrong = 0
        self._done = False
        observation = (
            "A row of cells, each 0 or 1, evolves by a hidden elementary cellular automaton: "
            "every cell's next value depends only on the triple (left neighbour, itself, right "
            "neighbour), and rows wrap around, so the first and last cells are neighbours. "
            f"Example: the row {sample} becomes {_step_row(self._table, sample)}.\n"
            f"Each turn you may give a row of {_MIN_WIDTH} to {_MAX_WIDTH} cells, answering for "
            "example \\boxed{row 0110}, and see its next generation.\n"
            "Goal: name the rule. List the new cell value for the neighbourhoods 111, 110, 101, "
            "100, 011, 010, 001, 000 in that order as eight digits, e.g. \\boxed{rule 00011110} "
            "(or give the same rule as a number 0-255, e.g. \\boxed{rule 30}). You have "
            f"{self.max_answers} rule answers and {self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").lower()
        match = re.fullmatch(r"(row|rule)\s+(\d+)", content)
        reward, terminated = 0.0, False
        if not match:
            observation = (
                "Answer \\boxed{row 0110} to evolve a row, or \\boxed{rule 00011110} (or a "
                "number 0-255) to name the rule."
            )
        elif match.group(1) == "row":
            row = match.group(2)
            if not set(row) <= {"0", "1"} or not _MIN_WIDTH <= len(row) <= _MAX_WIDTH:
                observation = f"A row is {_MIN_WIDTH} to {_MAX_WIDTH} digits 0 or 1, e.g. \\boxed{{row 0110}}."
            else:
                observation = f"The row {row} becomes {_step_row(self._table, row)}."
        else:
            text = match.group(2)
            if len(text) == 8 and set(text) <= {"0", "1"}:
                guess = int(text, 2)
            else:
                guess = int(text) if len(text) <= 3 else -1
            if not 0 <= guess <= 255:
                observation = "A rule is eight digits 0/1 or a number 0-255, e.g. \\boxed{rule 30}."
            elif guess == self._rule:
                observation, reward, terminated = f"Correct, it is rule {self._rule}!", 1.0, True
            else:
                self._wrong += 1
                left = self.max_answers - self._wrong
                terminated = left <= 0
                observation = f"Rule {guess} is wrong. " + (
                    "No answers left." if terminated else f"{left} answer(s) left."
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        # The cyclic rows 0001 and 1110 contain all eight neighbourhoods between them.
        bits = format(self._rule, "08b")
        return "\n".join(["\\boxed{row 0001}", "\\boxed{row 1110}", f"\\boxed{{rule {bits}}}"])

    def close(self) -> None:
        self._done = True
