import random
import re


class DrainTankEnv:
    skill = "Causal"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        rate, minutes = rng.randint(2, 4), rng.randint(2, 5)
        full = rate * minutes + rng.randint(3, 12)
        self.answer = full - rate * minutes
        self.turn, self.done = 0, False
        text = (
            f"A tank holds {full} litres. An open tap drains {rate} litres each minute. "
            f"After {minutes} minutes, how many litres are left? Reply \\boxed{{N}}."
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
            return "Correct.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        score = 0.0
        if self.done and guess is not None:
            score = max(0.0, 0.5 - abs(guess - self.answer) / 20)
        return "Check how much drained.", score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
