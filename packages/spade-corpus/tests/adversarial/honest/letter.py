# expect: valid
# family: honest
# hint: Compare fractions by cross-multiplying numerators and denominators.
"""Pick the largest fraction, answering with its letter."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


class FractionQuizEnv:
    """Pick the largest fraction, answering with its letter. Wrong answers may be retried until the turns run out."""

    skill = "Logic"

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
        fracs = rng.sample([(n, d) for d in range(2, 13) for n in range(1, d)], 4)
        while len({n / d for n, d in fracs}) < 4:
            fracs = rng.sample([(n, d) for d in range(2, 13) for n in range(1, d)], 4)
        letters = "ABCD"
        self._options = [f"{letters[i]}) {n}/{d}" for i, (n, d) in enumerate(fracs)]
        best = max(range(4), key=lambda i: fracs[i][0] / fracs[i][1])
        self._question = (
            "Which fraction is largest?\n"
            + "\n".join(self._options)
            + "\nReply with its letter in \\boxed{}."
        )
        self._answer = letters[best]
        self._turn = 0
        self._done = False
        self._last = self._question
        return self._last, {}

    def _judge(self, action, found, text):
        return text.lower() == self._answer.lower()

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
