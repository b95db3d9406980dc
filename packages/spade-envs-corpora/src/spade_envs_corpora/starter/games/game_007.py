import random
import re


class LineStepsEnv:
    skill = "Spatial"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.answer, self.turn, self.done = 0, 0, True

    def reset(self, seed=None):
        rng = random.Random(seed)
        start = rng.randint(1, 20)
        gap = rng.randint(3, 9)
        goal = start + gap if start + gap <= 20 else start - gap
        self.answer = abs(goal - start)
        self.turn, self.done = 0, False
        text = (
            f"You stand on square {start} of a row of 20 squares. The door is on square {goal}. "
            "How many one-square steps take you to the door? Reply \\boxed{N}."
        )
        return text, {}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        found = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        steps = int(found[-1]) if found else None
        if steps == self.answer:
            self.done = True
            return "You reach the door.", 1.0, True, False, {}
        if steps is None:
            text = "Say a number of steps."
        else:
            text = "You stop short." if steps < self.answer else "You walk past it."
        self.done = self.turn >= self.max_turns
        score = 0.0
        if self.done and steps is not None:
            score = max(0.0, 0.5 - abs(steps - self.answer) / 20)
        return text, score, self.done, False, {}

    def solution(self):
        return f"\\boxed{{{self.answer}}}"

    def close(self):
        pass
