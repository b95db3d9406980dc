"""Interventions: experiment on a hidden linear causal system, then predict a joint intervention."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NAMES = "ABCDE"
_WEIGHTS = [-2, -1, 1, 2, 3]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class InterventionEnv:
    """Multi-turn: single-variable do() experiments, then one prediction of a two-variable do().

    Each variable is its own constant plus a weighted sum of its causes (an acyclic linear
    system), so fixing a variable cuts the influence that flows into it from upstream.
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
        return ", ".join(f"{name}={values[name]}" for name in _NAMES)

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            self._order = rng.sample(_NAMES, len(_NAMES))  # hidden causal order
            self._base = {name: rng.randint(-30, 30) for name in _NAMES}
            self._causes = {name: {} for name in _NAMES}
            for j, effect in enumerate(self._order):
                for cause in self._order[:j]:
                    if rng.random() < 0.45:
                        self._causes[effect][cause] = rng.choice(_WEIGHTS)
            first, second, target = sorted(rng.sample(range(len(_NAMES)), 3))
            x, z, y = self._order[first], self._order[second], self._order[target]
            a, b = (
                rng.choice([-1, 1]) * rng.randint(5, 20),
                rng.choice([-1, 1]) * rng.randint(5, 20),
            )
            natural = self._values({})
            answer = self._values({x: a, z: b})[y]
            # Adding up the two separate effects double-counts what x passes on through z; keep
            # only systems where that naive answer is wrong, so the blocking has to be reasoned.
            effect_x = self._values({x: a})[y] - natural[y]
            effect_z = self._values({z: b})[y] - natural[y]
            naive = natural[y] + effect_x + effect_z
            if naive != answer and answer != natural[y] and abs(answer) <= 999:
                break
        self._x, self._z, self._y, self._a, self._b = x, z, y, a, b
        self._answer = answer
        self._turn = 0
        self._done = False
        observation = (
            f"Five integer quantities {', '.join(_NAMES)} are linked by hidden causal rules: each "
            "is its own constant plus a weighted sum of some of the others, with no feedback "
            f"loops. Left alone they read {self._show(natural)}.\n"
            "Each turn you may run one experiment that forces a single quantity to a value "
            "from -20 to 20 and shows the resulting values of all five, by answering "
            "\\boxed{do A=7} (any one name and value). Forcing a quantity overrides its own rule; "
            "the rest keep theirs.\n"
            f"Goal: predict {y} when {x} is forced to {a} and {z} is forced to {b} at the same "
            f"time. Answer with the number, for example \\boxed{{-12}}. That answer ends the "
            f"game: right wins, wrong loses. You have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        experiment = re.fullmatch(r"do\s*\(?\s*([A-Ea-e])\s*=\s*(-?\d+)\s*\)?", content, re.I)
        reward, terminated = 0.0, False
        if experiment and -20 <= int(experiment.group(2)) <= 20:
            name, value = experiment.group(1).upper(), int(experiment.group(2))
            observation = (
                f"With {name} forced to {value}: {self._show(self._values({name: value}))}."
            )
        elif re.fullmatch(r"-?\d+", content):
            terminated = True
            if int(content) == self._answer:
                observation, reward = "Correct prediction!", 1.0
            else:
                observation = f"Wrong: {self._y} would be {self._answer}. The game is lost."
        else:
            observation = (
                "Answer \\boxed{do X=v} with one of A-E and -20 <= v <= 20 to experiment, or "
                "\\boxed{N} with your prediction."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return "\n".join(
            [
                f"\\boxed{{do {self._x}={self._a}}}",
                f"\\boxed{{do {self._z}={self._b}}}",
                f"\\boxed{{{self._answer}}}",
            ]
        )

    def close(self) -> None:
        self._done = True
