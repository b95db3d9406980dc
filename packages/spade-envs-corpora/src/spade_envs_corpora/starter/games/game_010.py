import random
import re


class NextTermEnv:
    skill = "Pattern"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        start, gap = rng.randint(1, 9), rng.randint(2, 5)
        terms = [start + gap * k for k in range(4)]
        self.answer = start + gap * 4
        self.turn, self.done = 0, False
        shown = ", ".join(str(t) for t in terms)
        return f"What comes next: {shown}, ...? Reply \\boxed{{N}}.", {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "That continues the pattern.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "Reply with one number.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 30) if self.done else 0.0
        return ("Higher." if guess < self.answer else "Lower."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
