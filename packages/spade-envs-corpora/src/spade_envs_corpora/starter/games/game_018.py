import random
import re


class RopePiecesEnv:
    skill = "Optimization"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        length = random.Random(seed).randint(7, 25)
        self.answer = length // 2
        self.turn, self.done = 0, False
        text = (
            f"Cut a rope {length} metres long into pieces of 2 or 3 metres, using all of it. "
            "What is the largest number of pieces? Reply \\boxed{N}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        pieces = int(found[-1]) if found else None
        if pieces == self.answer:
            self.done = True
            return "That is the most pieces.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        score = 0.0
        if self.done and pieces is not None:
            score = max(0.0, 0.5 - abs(pieces - self.answer) / 12)
        return ("You can cut more." if pieces is not None and pieces < self.answer else "Not possible."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
