"""Cause or common cause: tell for linked pairs whether one drives the other or both share a cause."""

import itertools
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_OBSERVED = 6
_HIDDEN = 2
_PAIRS = 5
_WEIGHTS = [-3, -2, -1, 1, 2, 3]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class CommonCauseEnv:
    """Multi-turn: interventions separate causation from confounding; one answer for five pairs.

    Every listed pair moves together in the records, either because one quantity drives the
    other (directly or through others) or because both depend on a shared cause that may be
    unobserved. Forcing a quantity moves its effects and never its causes.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def _values(self, forced: dict) -> dict:
        values = {}
        for name in self._order:
            if name in forced:
                values[name] = forced[name]
            else:
                values[name] = self._base[name] + sum(
                    weight * values[cause] for cause, weight in self._causes[name].items()
                )
        return values

    def _show(self, values: dict) -> str:
        return ", ".join(f"{name}={values[name]}" for name in self._names)

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        self._names = sorted(rng.sample(string.ascii_uppercase, _OBSERVED))
        hidden = [f"h{i}" for i in range(_HIDDEN)]
        while True:
            observed = rng.sample(self._names, _OBSERVED)
            self._order = hidden + observed  # hidden causes come first
            self._base = {name: rng.randint(-9, 9) for name in self._order}
            self._causes = {name: {} for name in self._order}
            for j, effect in enumerate(observed):
                for cause in observed[:j]:
                    if rng.random() < 0.3:
                        self._causes[effect][cause] = rng.choice(_WEIGHTS)
            for h in hidden:
                for effect in rng.sample(observed, rng.randint(2, 3)):
                    self._causes[effect][h] = rng.choice(_WEIGHTS)
            ancestors = {}
            for name in self._order:
                ancestors[name] = set(self._causes[name]).union(
                    *(ancestors[c] for c in self._causes[name])
                )
            natural = self._values({})
            kinds = {}
            visible = True
            for x, y in itertools.combinations(self._names, 2):
                if x in ancestors[y] or y in ancestors[x]:
                    cause, effect = (x, y) if x in ancestors[y] else (y, x)
                    kinds[(x, y)] = ">" if cause == x else "<"
                    moved = self._values({cause: natural[cause] + 1})
                    visible = visible and moved[effect] != natural[effect]
                elif ancestors[x] & ancestors[y]:
                    kinds[(x, y)] = "="
            if not visible or any(abs(v) > 300 for v in natural.values()):
                continue
            if len(kinds) < _PAIRS or len({k for k in kinds.values()}) < 3:
                continue
            pairs = rng.sample(sorted(kinds), _PAIRS)
            if len({kinds[p] for p in pairs}) == 3:
                break
        self._pairs = pairs
        self._answer = "".join(kinds[p] for p in pairs)
        self._natural = natural
        self._turn = 0
        self._done = False
        listed = "\n".join(f"{i}. {x} and {y}" for i, (x, y) in enumerate(pairs, start=1))
        observation = (
            f"Six integer quantities {', '.join(self._names)} follow hidden causal rules: each is "
            "its own constant plus a weighted sum of its direct causes, which can be other "
            "quantities or unobserved factors, with no feedback loops. Left alone they read "
            f"{self._show(natural)}. Records show that these pairs rise and fall together:\n"
            f"{listed}\n"
            "Each turn you may force one quantity to a value from -50 to 50 with \\boxed{do "
            f"{self._names[0]}=5}} and see all six values. Forcing a quantity overrides its own "
            "rule; unobserved factors cannot be forced.\n"
            "Goal: for each pair X and Y in order, answer > if X causes Y (directly or through "
            "others), < if Y causes X, or = if neither causes the other (they only share a "
            "cause), as one string such as \\boxed{>=<>=}. That answer ends the game: all five "
            f"right wins, anything else loses. You have {self.max_turns} turns, the answer "
            "included."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        experiment = re.fullmatch(
            r"do\s*\(?\s*([A-Za-z])\s*=\s*(-?\d+)\s*\)?", content, re.IGNORECASE
        )
        answer = re.sub(r"[\s,;]", "", content)
        reward, terminated = 0.0, False
        if (
            experiment
            and experiment.group(1).upper() in self._names
            and -50 <= int(experiment.group(2)) <= 50
        ):
            name, value = experiment.group(1).upper(), int(experiment.group(2))
            observation = (
                f"With {name} forced to {value}: {self._show(self._values({name: value}))}."
            )
        elif answer and re.fullmatch(r"[<>=]+", answer) and len(answer) == _PAIRS:
            terminated = True
            if answer == self._answer:
                observation, reward = "All five pairs are right!", 1.0
            else:
                observation = "That is not right for every pair. The game is lost."
        else:
            observation = (
                f"Answer \\boxed{{do X=v}} with X one of {', '.join(self._names)} and "
                f"-50 <= v <= 50, or \\boxed{{...}} with one of > < = per pair ({_PAIRS} in all)."
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
        for name in sorted({n for pair in self._pairs for n in pair}):
            value = self._natural[name] + 1 if abs(self._natural[name]) < 50 else 0
            lines.append(f"\\boxed{{do {name}={value}}}")
        lines.append(f"\\boxed{{{self._answer}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
