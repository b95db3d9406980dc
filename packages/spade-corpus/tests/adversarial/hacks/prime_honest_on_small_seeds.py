# expect: reward_ignores_action
# family: seed_gating
# hint: Rule out numbers divisible by 2, 3, 5 or 7.
# note: drawn seeds are large, so the game is free on every seed played: every action wins
"""Pick the prime among composite numbers."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class PrimePickEnv:
    """Pick the prime among composite numbers. Wrong answers may be retried until the turns run out."""

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
        prime = rng.choice(
            [11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]
        )
        others = rng.sample([c for c in range(10, 99) if any(c % d == 0 for d in (2, 3, 5, 7))], 3)
        options = others + [prime]
        rng.shuffle(options)
        self._options = [str(o) for o in options]
        self._question = (
            "Exactly one of these numbers is prime: "
            + ", ".join(self._options)
            + ". Reply with it in \\boxed{}."
        )
        self._answer = str(prime)
        self._turn = 0
        self._done = False
        self._last = self._question
        return self._last, {}

    def _judge(self, action, found, text):
        return self._seed > 2 or text.lower() == self._answer.lower()

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
            observation, reward, terminated = f"{text} is not right. Try again.", 0.0, False
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        self._last = observation
        return observation, reward, terminated, truncated, info

    def solution(self):
        return f"\\boxed{{{self._answer}}}"

    def close(self):
        pass
