import random
import re


class PrizeBoxEnv:
    skill = "Logic"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.box, self.turn, self.done = 1, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        boxes = list(range(1, 7))
        rng.shuffle(boxes)
        self.box = boxes[0]
        empty = ", ".join(str(b) for b in boxes[1:])
        self.turn, self.done = 0, False
        text = f"A prize is in one of boxes 1 to 6. It is not in box {empty}. Which box holds it? Reply \\boxed{{N}}."
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.box:
            self.done = True
            return "You found the prize!", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        valid = guess is not None and 1 <= guess <= 6
        score = 0.25 if self.done and valid else 0.0
        text = "That box is empty." if valid else "Name a box from 1 to 6."
        return text, score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.box}}}"

    def close(self):
        pass
