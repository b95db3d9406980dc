import random
import re


class CityBlocksEnv:
    skill = "Spatial"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        x1, y1, x2, y2 = (rng.randint(0, 6) for _ in range(4))
        if (x1, y1) == (x2, y2):
            x2 = (x2 + 3) % 7
        self.answer = abs(x1 - x2) + abs(y1 - y2)
        self.turn, self.done = 0, False
        text = (
            f"On a street grid you walk from corner ({x1},{y1}) to corner ({x2},{y2}), one block "
            "at a time, only north, south, east or west. Fewest blocks? Reply \\boxed{N}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Shortest walk found.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "Answer with a number of blocks.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 12) if self.done else 0.0
        return ("Too few." if guess < self.answer else "Too many."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
