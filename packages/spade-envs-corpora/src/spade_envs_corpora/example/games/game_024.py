"""Alternating guard: find the treasure door by asking a guard who alternates truth and lies."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ASK = re.compile(r"ask\s+(\d+)\s*(?:-|to|\.\.)\s*(\d+)", re.IGNORECASE)
_OPEN = re.compile(r"open\s+(\d+)", re.IGNORECASE)


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class AlternatingGuardEnv:
    """Multi-turn: yes/no range questions to an alternating liar, then open one door."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, num_doors: int = 100, **kwargs):
        self.max_turns = max_turns
        self.num_doors = max(8, min(num_doors, 1000))
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.num_doors
        doors = list(range(1, n + 1))
        rng.shuffle(doors)
        self._door = doors[0]
        self._lies_first = rng.random() < 0.5
        low = rng.randint(1, n)
        high = rng.randint(low, n)
        inside = low <= self._door <= high
        free = "yes" if inside != self._lies_first else "no"
        self._asked = 1
        self._turn = 0
        self._done = False
        observation = (
            f"A treasure lies behind one of {n} doors numbered 1 to {n}. A guard knows which. "
            "He answers yes or no, and he alternates: on the questions he answers he tells the "
            "truth and lies in turn, but you are not told whether his first answer is a truth "
            "or a lie. Ask whether the treasure is behind a door in a range with "
            "\\boxed{ask 10-45}, or open a door with \\boxed{open 17}. You may open only one "
            f"door: the right one wins, a wrong one loses. You have {self.max_turns} turns. "
            f"Question 1 was asked for you: is the treasure behind a door from {low} to {high}? "
            f"The guard said: {free}."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        n = self.num_doors
        content = _last_boxed(action) or ""
        ask, opened = _ASK.fullmatch(content), _OPEN.fullmatch(content)
        reward, terminated = 0.0, False
        if ask:
            low, high = int(ask.group(1)), int(ask.group(2))
            if not (1 <= low <= high <= n):
                observation = f"Ask about a range low-high with 1 <= low <= high <= {n}."
            else:
                truthful = (self._asked % 2 == 0) != self._lies_first
                inside = low <= self._door <= high
                self._asked += 1
                answer = "yes" if inside == truthful else "no"
                observation = (
                    f"Question {self._asked}: is the treasure behind a door from {low} to "
                    f"{high}? The guard says: {answer}."
                )
        elif opened:
            door = int(opened.group(1))
            if not 1 <= door <= n:
                observation = f"There is no door {door}; doors are numbered 1 to {n}."
            elif door == self._door:
                observation, reward, terminated = (
                    f"Door {door} hides the treasure. You win!",
                    1.0,
                    True,
                )
            else:
                observation, terminated = f"Door {door} is empty. You lose.", True
        else:
            observation = (
                "Answer inside \\boxed{...} with a question like \\boxed{ask 10-45} or a door to "
                "open like \\boxed{open 17}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "questions": getattr(self, "_asked", 0)}

    def solution(self) -> str:
        # One question whose true answer is known (the whole range) reveals the guard's phase;
        # after that every answer can be decoded, so a plain binary search follows.
        lines = [f"\\boxed{{ask 1-{self.num_doors}}}"]
        low, high = 1, self.num_doors
        while low < high:
            mid = (low + high) // 2
            lines.append(f"\\boxed{{ask {low}-{mid}}}")
            if self._door <= mid:
                high = mid
            else:
                low = mid + 1
        lines.append(f"\\boxed{{open {low}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
