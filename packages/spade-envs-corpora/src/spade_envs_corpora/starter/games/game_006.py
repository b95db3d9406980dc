import random
import re


class AboveFiveEnv:
    skill = "Logic"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        numbers = [rng.randint(0, 12) for _ in range(8)]
        self.answer = sum(1 for n in numbers if n > 5)
        self.turn, self.done = 0, False
        listed = ", ".join(str(n) for n in numbers)
        return f"List: {listed}. Count the numbers greater than five. Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Yes!", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        score = 0.0
        if self.done and guess is not None:
            score = max(0.0, 0.5 - abs(guess - self.answer) / 10)
        return "Not quite, count again.", score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
