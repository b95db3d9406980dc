import random
import re


class SquaresEnv:
    skill = "Pattern"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        k = random.Random(seed).randint(1, 5)
        shown = ", ".join(str((k + i) ** 2) for i in range(3))
        self.answer = (k + 3) ** 2
        self.turn, self.done = 0, False
        return f"Continue the sequence {shown}, ... with its next number. Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Yes, that is the next number.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "Reply with a number.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 60) if self.done else 0.0
        return ("Too small." if guess < self.answer else "Too large."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
