"""Knights and knaves: knights always tell the truth, knaves always lie; say who is which."""

import itertools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NAMES = ["Ada", "Ben", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo"]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _holds(statement, knights):
    """Whether a statement is true when knights[i] says whether person i is a knight."""
    kind, people, value = statement
    kinds = [knights[i] for i in people]
    if kind == "is":
        return kinds[0] == value
    if kind == "same":
        return kinds[0] == kinds[1]
    if kind == "differ":
        return kinds[0] != kinds[1]
    if kind == "both":
        return kinds[0] == value and kinds[1] == value
    if kind == "at_least_one":
        return value in kinds
    if kind == "exactly":
        return sum(kinds) == value
    return (not kinds[0]) or (not kinds[1])  # "if": if the first is a knight, the second is a knave


def _describe(statement):
    kind, people, value = statement
    names = [_NAMES[i] for i in people]
    role = "a knight" if value is True else "a knave"
    roles = "knights" if value is True else "knaves"
    if kind == "is":
        return f"{names[0]} is {role}."
    if kind == "same":
        return f"{names[0]} and {names[1]} are of the same kind."
    if kind == "differ":
        return f"{names[0]} and {names[1]} are of different kinds."
    if kind == "both":
        return f"{names[0]} and {names[1]} are both {roles}."
    if kind == "at_least_one":
        return f"At least one of {names[0]} and {names[1]} is {role}."
    if kind == "exactly":
        count = "one of them is a knight" if value == 1 else f"{value} of them are knights"
        return f"Among {names[0]}, {names[1]} and {names[2]}, exactly {count}."
    return f"If {names[0]} is a knight, then {names[1]} is a knave."


def _random_statement(rng, speaker, count):
    others = [i for i in range(count) if i != speaker]
    kind = rng.choice(["is", "same", "differ", "both", "at_least_one", "exactly", "if"])
    if kind == "exactly":
        return kind, tuple(rng.sample(others, 3)), rng.randrange(4)
    if kind in ("is", "both", "at_least_one"):
        value = rng.random() < 0.5
    else:
        value = None
    size = 1 if kind == "is" else 2
    return kind, tuple(rng.sample(others, size)), value


class KnightsKnavesEnv:
    """Single answer with retries: the kind of every islander, from their statements."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, num_people: int = 8, max_attempts: int = 3, **kwargs):
        self.max_turns = max_turns
        self.num_people = max(4, min(num_people, len(_NAMES)))
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.num_people
        # Draw puzzles until exactly one assignment is consistent with all statements.
        while True:
            knights = [rng.random() < 0.5 for _ in range(n)]
            statements = []
            for speaker in range(n):
                statement = _random_statement(rng, speaker, n)
                while _holds(statement, knights) != knights[speaker]:
                    statement = _random_statement(rng, speaker, n)
                statements.append(statement)
            consistent = [
                world
                for world in itertools.product([True, False], repeat=n)
                if all(_holds(s, world) == world[i] for i, s in enumerate(statements))
            ]
            if len(consistent) == 1:
                break
        self._answer = "".join("K" if k else "N" for k in knights)
        self._turn = 0
        self._attempts = 0
        self._done = False
        names = _NAMES[:n]
        said = "\n".join(f"{names[i]} says: {_describe(s)}" for i, s in enumerate(statements))
        observation = (
            f"On this island every person is either a knight, who always tells the truth, or a "
            f"knave, who always lies. You meet {n} people: {', '.join(names)}.\n{said}\n\n"
            "Exactly one assignment of kinds fits every statement. Answer with one letter per "
            f"person in the order {', '.join(names)}: K for knight, N for knave (for four people "
            f"that would look like \\boxed{{KNNK}}). You have {self.max_attempts} attempts "
            f"within {self.max_turns} turns; a wrong answer is only marked wrong."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action)
        letters = re.sub(r"[\s,;]", "", content or "").upper()
        reward, terminated = 0.0, False
        if not re.fullmatch(f"[KN]{{{self.num_people}}}", letters):
            observation = (
                f"Answer with exactly {self.num_people} letters K or N inside \\boxed{{...}}, one "
                "per person in the order given."
            )
        elif letters == self._answer:
            observation, reward, terminated = "Correct!", 1.0, True
        else:
            self._attempts += 1
            left = self.max_attempts - self._attempts
            terminated = left <= 0
            observation = f"{letters} is wrong. " + (
                "No attempts left." if terminated else f"{left} attempt(s) left."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return f"\\boxed{{{self._answer}}}"

    def close(self) -> None:
        self._done = True
