import random
import re


class MarbleJarEnv:
    skill = "Causal"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        start, per_pull, pulls = rng.randint(1, 9), rng.randint(2, 4), rng.randint(2, 5)
        self.answer = start + per_pull * pulls
        self.turn, self.done = 0, False
        text = (
            f"A jar holds {start} marbles. Each pull of a lever drops {per_pull} more marbles in. "
            f"The lever is pulled {pulls} times. How many marbles are in the jar? Reply \\boxed{{N}}."
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
            return "That is the count.", 1.0, True, False, {}
        self.done = self.turn >= self.max_turns
        if guess is None:
            return "Count the marbles and reply \\boxed{N}.", 0.0, self.done, False, {}
        score = max(0.0, 0.5 - abs(guess - self.answer) / 25) if self.done else 0.0
        return ("More than that." if guess < self.answer else "Fewer than that."), score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
