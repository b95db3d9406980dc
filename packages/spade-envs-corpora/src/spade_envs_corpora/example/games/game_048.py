"""Budget split: divide a budget among projects with hidden diminishing returns."""

import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PROJECTS = "PQRS"


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _splits(budget, parts):
    """Every way to write budget as an ordered sum of parts non-negative integers."""
    for cuts in itertools.combinations(range(budget + parts - 1), parts - 1):
        bounds = (-1, *cuts, budget + parts - 1)
        yield tuple(bounds[i + 1] - bounds[i] - 1 for i in range(parts))


class BudgetSplitEnv:
    """Multi-turn: each trial split reports every project's output; the best split wins.

    `_returns[p][k]` is the hidden output of project p given k units; gains per unit shrink.
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, budget: int = 20, **kwargs):
        self.max_turns = max_turns
        self.budget = max(8, min(budget, 40))
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        budget, parts = self.budget, len(_PROJECTS)
        even = tuple(budget // parts + (i < budget % parts) for i in range(parts))
        # Redraw until the best split is unique and clearly uneven.
        while True:
            returns = []
            for _ in range(parts):
                gain, values = rng.randint(25, 90), [0]
                for _ in range(budget):
                    values.append(values[-1] + gain)
                    gain -= rng.randint(1, 9)
                returns.append(values)
            ranked = sorted(
                (sum(returns[p][k] for p, k in enumerate(split)), split)
                for split in _splits(budget, parts)
            )
            (best, target), runner_up = ranked[-1], ranked[-2][0]
            if best > runner_up and sum(abs(a - b) for a, b in zip(target, even, strict=True)) >= 6:
                break
        self._returns, self._best, self._target = returns, best, target
        self._turn = 0
        self._done = False
        observation = (
            f"You must split a budget of exactly {budget} units among the projects "
            f"{', '.join(_PROJECTS)}, whole units each (0 allowed). Each project's output "
            "depends only on its own units through a hidden rule with diminishing returns: "
            "every extra unit adds less than the one before (it can even subtract). The score "
            "is the total output. Each turn try a split by answering four numbers in the order "
            f"{' '.join(_PROJECTS)}, for example \\boxed{{{' '.join(map(str, even))}}}; you are "
            "told every project's output. A split with the highest possible score wins. You "
            f"have {self.max_turns} turns. A first trial for free: " + self._report(even)
        )
        return observation, self._info()

    def _report(self, split) -> str:
        outputs = [self._returns[p][k] for p, k in enumerate(split)]
        parts = ", ".join(
            f"{name} {k} -> {out}" for name, k, out in zip(_PROJECTS, split, outputs, strict=True)
        )
        return f"{parts}; total {sum(outputs)}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        numbers = re.fullmatch(
            r"(\d+)[\s,;/]+(\d+)[\s,;/]+(\d+)[\s,;/]+(\d+)", _last_boxed(action) or ""
        )
        reward, terminated = 0.0, False
        if not numbers:
            observation = (
                f"Answer with four whole numbers for {' '.join(_PROJECTS)} that add up to "
                f"{self.budget}, inside \\boxed{{...}}, for example \\boxed{{8 4 5 3}}."
            )
        else:
            split = tuple(int(k) for k in numbers.groups())
            if sum(split) != self.budget:
                observation = f"The units add up to {sum(split)}, not {self.budget}."
            else:
                observation = self._report(split)
                if sum(self._returns[p][k] for p, k in enumerate(split)) == self._best:
                    observation += " That is the highest possible score!"
                    reward, terminated = 1.0, True
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return f"\\boxed{{{' '.join(map(str, self._target))}}}"

    def close(self) -> None:
        self._done = True
