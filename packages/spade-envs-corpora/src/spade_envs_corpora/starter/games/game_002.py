import random
import re


class HalfEnv:
    skill = "Math"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        self.answer = random.Random(seed).randint(2, 12)
        self.turn, self.done = 0, False
        total = 2 * self.answer
        return f"I doubled a number and got {total}. What was the number? Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Right, that is half of it.", 1.0, True, False, {}
        if self.turn < self.max_turns:
            hint = "Try again." if guess is None else f"{guess} doubled is {2 * guess}. Try again."
            return hint, 0.0, False, False, {}
        self.done = True
        score = 0.0 if guess is None else max(0.0, 0.5 - abs(guess - self.answer) / 12)
        return "No more tries.", score, True, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
