import random
import re


class FewestCoinsEnv:
    skill = "Optimization"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        cents = random.Random(seed).randint(11, 39)
        self.answer = cents // 10 + (cents % 10) // 5 + cents % 5
        self.turn, self.done = 0, False
        text = (
            f"Pay exactly {cents} cents with coins of 1, 5 and 10 cents, using as few coins as "
            "possible. How many coins do you use? Reply \\boxed{N}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        coins = int(found[-1]) if found else None
        if coins == self.answer:
            self.done = True
            return "That is the fewest.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if coins is None:
            return "Reply with a number of coins.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(coins - self.answer) / 10) if self.done else 0.0
        text = "You can do with fewer." if coins > self.answer else "That is too few."
        return text, score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
