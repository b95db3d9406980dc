"""Counterfactual: inspect a factual world of a known structural model, then answer 'what if'."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_COUNT = 6
# Rule kinds by number of direct causes: (text pattern, function).
_ONE = [
    ("2*{0}", lambda p: 2 * p),
    ("{0}*{0}", lambda p: p * p),
    ("abs({0})", abs),
    ("-{0}", lambda p: -p),
]
_TWO = [
    ("{0} + {1}", lambda p, q: p + q),
    ("{0} - {1}", lambda p, q: p - q),
    ("{0} * {1}", lambda p, q: p * q),
    ("max({0}, {1})", max),
    ("min({0}, {1})", min),
]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class CounterfactualEnv:
    """Multi-turn: read hidden factual values, abduce each unobserved term, then predict.

    Each quantity equals a known function of its causes plus its own unobserved constant U. In
    the counterfactual world the constants stay as they were in the factual one, so each one
    on the way from the changed quantity to the asked one has to be recovered from factual
    readings before the change can be pushed through the nonlinear rules.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def _world(self, forced: dict) -> dict:
        values = {}
        for name in self._order:
            if name in forced:
                values[name] = forced[name]
            elif self._rules[name] is None:
                values[name] = self._noise[name]
            else:
                _, func = self._rules[name]
                values[name] = func(*(values[p] for p in self._parents[name])) + self._noise[name]
        return values

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        names = sorted(rng.sample(string.ascii_uppercase.replace("U", ""), _COUNT))
        while True:
            self._order = rng.sample(names, _COUNT)
            self._parents, self._rules, self._noise = {}, {}, {}
            for j, name in enumerate(self._order):
                earlier = self._order[:j]
                if j < 2 or rng.random() < 0.1:
                    self._parents[name], self._rules[name] = [], None
                    self._noise[name] = rng.randint(-6, 6)
                    continue
                count = 1 if len(earlier) < 2 or rng.random() < 0.35 else 2
                # Favour recent causes so chains run deep.
                pool = earlier[-3:] if rng.random() < 0.7 else earlier
                parents = rng.sample(pool, min(count, len(pool)))
                self._parents[name] = parents
                self._rules[name] = rng.choice(_ONE if len(parents) == 1 else _TWO)
                self._noise[name] = rng.randint(-5, 5)
            descendants = {name: set() for name in names}
            for name in reversed(self._order):
                for p in self._parents[name]:
                    descendants[p] |= {name} | descendants[name]
            choices = [
                (x, y)
                for x in names
                for y in descendants[x]
                if y not in self._parents[x] and x not in self._parents[y]
            ]
            if not choices:
                continue
            x, y = rng.choice(sorted(choices))
            factual = self._world({})
            value = factual[x] + rng.choice([-1, 1]) * rng.randint(2, 6)
            counterfactual = self._world({x: value})
            if (
                counterfactual[y] != factual[y]
                and all(abs(v) <= 99 for v in factual.values())
                and all(abs(v) <= 99 for v in counterfactual.values())
            ):
                break
        self._names, self._x, self._y, self._value = names, x, y, value
        self._factual, self._answer = factual, counterfactual[y]
        self._descendants = descendants
        self._turn = 0
        self._attempts = 0
        self._done = False
        rules = []
        for name in names:
            if self._rules[name] is None:
                rules.append(f"{name} = U_{name}")
            else:
                text = self._rules[name][0].format(*self._parents[name])
                rules.append(f"{name} = {text} + U_{name}")
        observation = (
            f"Six integer quantities {', '.join(names)} obey these structural rules, where each "
            "U_ is an unobserved integer constant belonging to its quantity:\n"
            + "\n".join(rules)
            + f"\nIn the actual world {x} = {factual[x]} and {y} = {factual[y]}; the other values "
            "are not shown.\n"
            f"Question: had {x} been {value} instead (everything else about the world, including "
            f"every U_, unchanged), what would {y} have been?\n"
            "Each turn you may look up one actual value with \\boxed{inspect "
            f"{names[0]}}}, or answer with a number such as \\boxed{{-7}}. You have "
            f"{self.max_attempts} answer attempts within {self.max_turns} turns; a wrong answer "
            "is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        inspect = re.fullmatch(r"inspect\s+([A-Za-z])", content, re.IGNORECASE)
        reward, terminated = 0.0, False
        if inspect and inspect.group(1).upper() in self._names:
            name = inspect.group(1).upper()
            observation = f"In the actual world {name} = {self._factual[name]}."
        elif re.fullmatch(r"-?\d+", content):
            if int(content) == self._answer:
                observation, reward, terminated = "Correct!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = f"{content} is wrong. " + (
                    "No attempts left." if terminated else f"{left} attempt(s) left."
                )
        else:
            observation = (
                f"Answer \\boxed{{inspect X}} with X one of {', '.join(self._names)}, or "
                "\\boxed{N} with your counterfactual value."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        # Every changed quantity between x and y, y included, needs its own value and its causes'
        # actual values to recover its U_.
        changed = [
            n
            for n in self._order
            if n in self._descendants[self._x] and (n == self._y or self._y in self._descendants[n])
        ]
        needed = set()
        for n in changed:
            needed |= {n, *self._parents[n]}
        needed -= {self._x, self._y}
        lines = [f"\\boxed{{inspect {n}}}" for n in sorted(needed)]
        lines.append(f"\\boxed{{{self._answer}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
