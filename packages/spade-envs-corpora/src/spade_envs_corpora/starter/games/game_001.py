import random
import re


class SumTriesEnv:
    skill = "Math"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        self.answer = a + b
        self.turn, self.done = 0, False
        text = f"What is {a} plus {b}? You have {self.max_turns} tries. Reply \\boxed{{N}}."
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "Correct!", 1.0, True, False, {}
        text = "No answer found." if guess is None else ("Too low." if guess < self.answer else "Too high.")
        if self.turn >= self.max_turns:
            self.done = True
            close = 0.0 if guess is None else max(0.0, 0.5 - abs(guess - self.answer) / 20)
            return text + " Out of tries.", close, True, False, {}
        return text, 0.0, False, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
