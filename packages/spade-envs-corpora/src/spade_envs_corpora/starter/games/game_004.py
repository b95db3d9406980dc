import random
import re


class OddCountEnv:
    skill = "Logic"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        numbers = [rng.randint(1, 30) for _ in range(7)]
        self.answer = sum(n % 2 for n in numbers)
        self.turn, self.done = 0, False
        listed = " ".join(str(n) for n in numbers)
        return f"Numbers: {listed}. How many of them are odd? Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Correct count!", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "Give the count as \\boxed{N}.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 8) if self.done else 0.0
        return ("Fewer." if guess > self.answer else "More."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
