"""Sufficient sets: switch factors on and off to find which combinations jointly set off an alarm."""

import itertools
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_FACTORS = 6
_RECORDS = 3


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class SufficientSetsEnv:
    """Multi-turn: trials with chosen factors present show the alarm; one answer names both sets.

    The alarm has two alternative causes, each a group of factors that must all be present
    together; no factor alone is enough, so removing factors one at a time from a sounding
    trial exposes a minimal group, and a second search finds the other.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def _sounds(self, present) -> bool:
        return any(group <= set(present) for group in self._groups)

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        self._names = "".join(sorted(rng.sample(string.ascii_uppercase, _FACTORS)))
        while True:
            first = frozenset(rng.sample(self._names, rng.randint(2, 3)))
            second = frozenset(rng.sample(self._names, rng.randint(2, 3)))
            if not (first <= second or second <= first):
                break
        self._groups = {first, second}
        records = []
        for _ in range(_RECORDS):
            present = sorted(rng.sample(self._names, rng.randint(2, _FACTORS - 1)))
            result = "alarm" if self._sounds(present) else "quiet"
            records.append(f"{''.join(present)}: {result}")
        self._turn = 0
        self._done = False
        observation = (
            f"A machine has {_FACTORS} on/off factors {', '.join(self._names)}. Its alarm has "
            "exactly two hidden causes, each a group of two or three factors that set the alarm "
            "off when all of that group's factors are on at once (neither group contains the "
            "other). The alarm sounds exactly when at least one group is complete; extra "
            f"factors do no harm. Earlier trials (factors on: result): {'; '.join(records)}.\n"
            "Each turn you may run one trial with only the listed factors on, for example "
            f"\\boxed{{try {self._names[:3]}}}, and hear alarm or quiet. When you know both "
            f"groups, answer them, for example \\boxed{{{self._names[:2]}, "
            f"{self._names[2:5]}}}. That answer ends the game: both groups exactly right wins, "
            f"anything else loses. You have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def _parse_groups(self, content):
        parts = [p for p in re.split(r"[\s,;]+", content.strip().upper()) if p]
        if len(parts) != 2 or any(set(p) - set(self._names) for p in parts):
            return None
        return {frozenset(p) for p in parts}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        trial = re.fullmatch(r"try\s*([A-Za-z\s,]*)", content.strip(), re.IGNORECASE)
        present = set(re.sub(r"[\s,]", "", trial.group(1)).upper()) if trial else None
        claimed = None if trial else self._parse_groups(content)
        reward, terminated = 0.0, False
        if present is not None and present <= set(self._names):
            shown = "".join(sorted(present)) or "none"
            result = "alarm" if self._sounds(present) else "quiet"
            observation = f"Trial with {shown} on: {result}."
        elif claimed is not None:
            terminated = True
            if claimed == self._groups:
                observation, reward = "Both groups are right!", 1.0
            else:
                observation = "Those are not the two groups. The game is lost."
        else:
            observation = (
                f"Answer \\boxed{{try ...}} with the factors to switch on (letters from "
                f"{self._names}), or the two groups such as \\boxed{{AB, CDE}}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        groups = sorted("".join(sorted(g)) for g in self._groups)
        lines = [f"\\boxed{{try {g}}}" for g in groups]
        # Each group minus any one factor is quiet unless the other group fits inside it.
        for g in groups:
            for rest in itertools.combinations(g, len(g) - 1):
                if not self._sounds(rest):
                    lines.append(f"\\boxed{{try {''.join(rest)}}}")
                    break
        lines.append(f"\\boxed{{{', '.join(groups)}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
