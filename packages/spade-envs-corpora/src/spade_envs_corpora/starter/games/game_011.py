import random
import re


class DoublingEnv:
    skill = "Pattern"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        first = random.Random(seed).randint(1, 6)
        terms = [first, first * 2, first * 4]
        self.answer = first * 8
        self.turn, self.done = 0, False
        return f"Each number is twice the one before: {terms[0]}, {terms[1]}, {terms[2]}, ? Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Correct!", 1.0, True, False, {}
        last = self.turn >= self.max_turns
        self.done = last
        score = 0.0
        if last and guess is not None:
            score = max(0.0, 0.5 - abs(guess - self.answer) / 40)
        return f"No, it is not {guess}.", score, last, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
