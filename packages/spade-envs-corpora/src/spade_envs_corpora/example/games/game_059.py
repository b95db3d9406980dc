"""Dose thresholds: dose hidden drugs and read capped responses to find where each starts acting."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_DRUGS = 3
_CAP = 100
_MAX_DOSE = 100


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class DoseThresholdEnv:
    """Multi-turn: dose-response experiments; one answer with every drug's threshold.

    Below its threshold a drug does nothing, above it the response grows by a hidden gain per
    unit of dose until the meter saturates, so a zero or a saturated reading only bounds the
    threshold and two readings on the rising part pin it down.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def _response(self, drug: str, dose: int) -> int:
        threshold, gain = self._params[drug]
        return min(_CAP, gain * max(0, dose - threshold))

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        self._names = sorted(rng.sample("ABCDEFGHJKLMNPQRSTVWXYZ", _DRUGS))
        self._params = {d: (rng.randint(5, 60), rng.randint(1, 4)) for d in self._names}
        # One free reading per drug at a random dose, so episodes differ from the start.
        self._start = {d: rng.randint(10, 90) for d in self._names}
        readings = ", ".join(
            f"{d} at dose {self._start[d]} gave {self._response(d, self._start[d])}"
            for d in self._names
        )
        self._turn = 0
        self._done = False
        example = " ".join(f"{d}=20" for d in self._names)
        observation = (
            f"Three drugs {', '.join(self._names)} each act on a cell culture. Each has a hidden "
            "threshold (an integer from 5 to 60) and a hidden gain (an integer from 1 to 4): a "
            "dose at or below the threshold has no effect (response 0), and each unit of dose "
            "above it adds the gain to the response, which the meter shows up to at most "
            f"{_CAP}. Earlier runs: {readings}.\n"
            f"Each turn you may test one drug at a dose from 0 to {_MAX_DOSE} with "
            f"\\boxed{{test {self._names[0]} 35}} and read the response. When you know every "
            f"threshold, answer them all, for example \\boxed{{{example}}}. That answer ends the "
            f"game: all right wins, anything else loses. You have {self.max_turns} turns, the "
            "answer included."
        )
        return observation, self._info()

    def _parse_answer(self, content):
        parts = [p for p in re.split(r"[\s,;]+", content.strip().upper()) if p]
        claimed = {}
        for part in parts:
            match = re.fullmatch(r"([A-Z])[=:](\d+)", part)
            if not match:
                return None
            claimed[match.group(1)] = int(match.group(2))
        if sorted(claimed) != self._names or len(parts) != _DRUGS:
            return None
        return claimed

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        test = re.fullmatch(r"test\s+([A-Za-z])\s*[, ]\s*(\d+)", content.strip(), re.IGNORECASE)
        claimed = self._parse_answer(content)
        reward, terminated = 0.0, False
        if test and test.group(1).upper() in self._names and int(test.group(2)) <= _MAX_DOSE:
            drug, dose = test.group(1).upper(), int(test.group(2))
            observation = f"{drug} at dose {dose}: response {self._response(drug, dose)}."
        elif claimed is not None:
            terminated = True
            if all(claimed[d] == self._params[d][0] for d in self._names):
                observation, reward = "All thresholds are right!", 1.0
            else:
                observation = "Not all thresholds are right. The game is lost."
        else:
            observation = (
                f"Answer \\boxed{{test X d}} with X one of {', '.join(self._names)} and a dose "
                f"d from 0 to {_MAX_DOSE}, or every threshold such as "
                f"\\boxed{{{' '.join(f'{d}=20' for d in self._names)}}}."
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
        for d in self._names:
            threshold = self._params[d][0]
            lines.append(f"\\boxed{{test {d} {threshold + 1}}}")
            lines.append(f"\\boxed{{test {d} {threshold + 2}}}")
        answer = " ".join(f"{d}={self._params[d][0]}" for d in self._names)
        lines.append(f"\\boxed{{{answer}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
