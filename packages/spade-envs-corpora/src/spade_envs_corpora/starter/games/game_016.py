import random
import re


class PeakFinderEnv:
    skill = "Optimization"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.peak, self.best, self.turn, self.done = 1, 0, 0, True

    def reset(self, seed=None):
        self.peak = random.Random(seed).randint(1, 9)
        self.best, self.turn, self.done = 0, 0, False
        text = (
            "A hidden dial has a best setting from 1 to 9. Each try shows a score from 0 to 9 "
            "that is higher the closer you are. Reply \\boxed{N} with a setting."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        setting = int(found[-1]) if found else None
        if setting == self.peak:
            self.done = True
            return "Score 9: the best setting.", 1.0, True, False, {}
        score = 0 if setting is None else max(0, 9 - 2 * abs(setting - self.peak))
        self.best = max(self.best, score)
        self.done = self.turn >= self.max_turns
        reward = self.best / 18 if self.done else 0.0
        return f"Score {score}.", reward, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.peak}}}"

    def close(self):
        pass
