import random
import re


class DifferenceEnv:
    skill = "Math"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        small = rng.randint(1, 9)
        big = small + rng.randint(2, 9)
        self.answer = big - small
        self.turn, self.done = 0, False
        return f"Take {small} away from {big}. What is left? Reply \\boxed{{N}}.", {}

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
        if guess is None:
            return "Reply with a number in \\boxed{}.", 0.0, last, False, {}
        word = "small" if guess < self.answer else "big"
        score = max(0.0, 0.5 - abs(guess - self.answer) / 16) if last else 0.0
        return f"That is too {word}.", score, last, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
