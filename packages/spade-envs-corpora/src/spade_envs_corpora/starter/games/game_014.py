import random
import re


class MachineRuleEnv:
    skill = "Causal"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.add, self.answer, self.turn, self.done = 0, 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.add = rng.randint(2, 9)
        a, b, ask = rng.sample(range(1, 10), 3)
        self.answer = ask + self.add
        self.turn, self.done = 0, False
        text = (
            f"A machine changes numbers by one fixed rule. {a} went in and {a + self.add} came out; "
            f"{b} went in and {b + self.add} came out. What comes out for {ask}? Reply \\boxed{{N}}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        guess = int(found[-1]) if found else None
        if guess == self.answer:
            self.done = True
            return "The machine agrees.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "The machine waits for a number.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 20) if self.done else 0.0
        return "The machine shows something else.", score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
