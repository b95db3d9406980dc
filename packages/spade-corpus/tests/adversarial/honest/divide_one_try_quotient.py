# expect: valid
# family: honest
# hint: Long division: find the whole part first, then two more digits, then round.
"""Divide and round to two decimals."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class DivideEnv:
    """Divide and round to two decimals. Wrong answers may be retried until the turns run out."""

    skill = "Math"

    def __init__(self, max_turns: int = 5, **kwargs):
        self.max_turns = max_turns
        self._answer = ""
        self._question = ""
        self._options = []
        self._seed = 0
        self._turn = 0
        self._done = True
        self._last = ""

    def reset(self, seed=None):
        rng = random.Random(seed)
        self._seed = seed or 0
        a, b = rng.randint(100, 999), rng.randint(3, 29)
        self._question = f"What is {a} / {b}, to two decimal places? Reply with \\boxed{{x}}."
        self._answer = f"{a / b:.2f}"
        self._turn = 0
        self._done = False
        self._last = self._question
        return self._last, {}

    def _judge(self, action, found, text):
        try:
            value = float(text)
        except ValueError:
            return False
        return value == value and abs(value - float(self._answer)) <= 0.011

    def step(self, action):
        if self._done:
            return "The episode is over; call reset().", 0.0, True, False, {}
        self._turn += 1
        found = _BOXED.findall(action)
        text = found[-1].strip() if found else ""
        info = {"turn": self._turn}
        if self._judge(action, found, text):
            observation, reward, terminated = "Correct!", 1.0, True
        elif not found:
            observation, reward, terminated = "Put your answer in \\boxed{}.", 0.0, False
        else:
            observation, reward, terminated = f"{text} is wrong; the episode is over.", 0.0, True
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        self._last = observation
        return observation, reward, terminated, truncated, info

    def solution(self):
        return f"\\boxed{{{self._answer}}}"

    def close(self):
        pass
