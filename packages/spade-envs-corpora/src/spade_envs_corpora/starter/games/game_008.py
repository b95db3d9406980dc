import random
import re


class GridCellEnv:
    skill = "Spatial"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.cell, self.turn, self.done = 1, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        row, col = rng.randint(1, 3), rng.randint(1, 3)
        self.cell = 3 * (row - 1) + col
        self.turn, self.done = 0, False
        text = (
            "Nine cells form a square of three rows, numbered 1 to 9 left to right, top row first. "
            f"Which number is in row {row}, column {col}? Reply \\boxed{{N}}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.cell:
            self.done = True
            return "Right cell.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None or not 1 <= guess <= 9:
            return "Pick a cell from 1 to 9.", 0.0, self.done, False, {}
        same_row = (guess - 1) // 3 == (self.cell - 1) // 3
        score = (0.3 if same_row else 0.1) if self.done else 0.0
        text = "Right row, wrong column." if same_row else "Wrong row."
        return text, score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.cell}}}"

    def close(self):
        pass
