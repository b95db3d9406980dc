"""Conflicting stages: a pipeline fails only when two hidden stages run together; find the pair."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_STAGES = 12
_JOBS = [
    "parse",
    "dedupe",
    "normalize",
    "tokenize",
    "filter",
    "sort",
    "compress",
    "encrypt",
    "index",
    "validate",
    "cache",
    "resize",
    "merge",
    "split",
    "checksum",
    "annotate",
    "translate",
    "sample",
    "shuffle",
    "archive",
]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class ConflictPairEnv:
    """Multi-turn: runs with chosen stages switched on show PASS or FAIL; one answer names the pair.

    The failure is an interaction: neither culprit breaks the run alone, so switching stages
    off one at a time from the full pipeline only narrows things when done with a plan.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        self._jobs = rng.sample(_JOBS, _STAGES)
        self._pair = tuple(sorted(rng.sample(range(1, _STAGES + 1), 2)))
        self._turn = 0
        self._done = False
        listing = ", ".join(f"{i} {job}" for i, job in enumerate(self._jobs, start=1))
        observation = (
            f"A data pipeline has {_STAGES} stages: {listing}. With every stage switched on, the "
            "run FAILS. The failure has one cause: two particular stages conflict, and a run "
            "fails exactly when both of them are switched on; any other stages, and either of "
            "the two alone, are harmless.\n"
            "Each turn you may do one run with only the stages you list switched on, for example "
            "\\boxed{run 1 2 5 9}, and see PASS or FAIL. When you know the conflicting pair, "
            "answer \\boxed{conflict 3 8}; that answer ends the game: the right pair wins, "
            f"anything else loses. You have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def _fails(self, stages) -> bool:
        return set(self._pair) <= set(stages)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        match = re.fullmatch(r"(run|conflict)((?:[\s,]+\d+)*)", content.strip(), re.IGNORECASE)
        numbers = [int(n) for n in re.findall(r"\d+", match.group(2))] if match else []
        valid = match and all(1 <= n <= _STAGES for n in numbers)
        reward, terminated = 0.0, False
        if valid and match.group(1).lower() == "run":
            stages = sorted(set(numbers))
            result = "FAIL" if self._fails(stages) else "PASS"
            shown = " ".join(str(s) for s in stages) or "none"
            observation = f"Run with stages {shown} on: {result}."
        elif valid and len(set(numbers)) == 2:
            terminated = True
            if tuple(sorted(numbers)) == self._pair:
                observation, reward = "Right: that is the conflicting pair!", 1.0
            else:
                observation = "Wrong pair. The game is lost."
        else:
            observation = (
                f"Answer \\boxed{{run a b c ...}} listing the stages (1 to {_STAGES}) to switch "
                "on, or \\boxed{conflict a b} naming two different stages."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        lines = []
        # The shortest failing prefix 1..k ends at the later culprit.
        low, high = 2, _STAGES
        while low < high:
            mid = (low + high) // 2
            lines.append("\\boxed{run " + " ".join(str(s) for s in range(1, mid + 1)) + "}")
            if self._fails(range(1, mid + 1)):
                high = mid
            else:
                low = mid + 1
        later = low
        # With the later culprit on, the shortest failing prefix ends at the earlier one.
        low, high = 1, later - 1
        while low < high:
            mid = (low + high) // 2
            stages = [*range(1, mid + 1), later]
            lines.append("\\boxed{run " + " ".join(str(s) for s in stages) + "}")
            if self._fails(stages):
                high = mid
            else:
                low = mid + 1
        lines.append(f"\\boxed{{conflict {low} {later}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
