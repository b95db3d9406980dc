"""Triple rule: probe a hidden property of integer triples, then classify a test set."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_TEST_SIZE = 8
_LOW, _HIGH = 1, 20  # range of the test triples; queries may use 0 to 99

# The hidden rule is one of these properties of an ordered triple (a, b, c).
_RULES = {
    "strictly increasing": lambda a, b, c: a < b < c,
    "strictly decreasing": lambda a, b, c: a > b > c,
    "even sum": lambda a, b, c: (a + b + c) % 2 == 0,
    "all odd": lambda a, b, c: a % 2 == 1 and b % 2 == 1 and c % 2 == 1,
    "first two add up to the third": lambda a, b, c: a + b == c,
    "last is the largest": lambda a, b, c: c > a and c > b,
    "first is the smallest": lambda a, b, c: a < b and a < c,
    "middle is the largest": lambda a, b, c: b > a and b > c,
    "all different": lambda a, b, c: len({a, b, c}) == 3,
    "some two equal": lambda a, b, c: len({a, b, c}) < 3,
    "contains a multiple of 3": lambda a, b, c: a % 3 == 0 or b % 3 == 0 or c % 3 == 0,
    "evenly spaced": lambda a, b, c: a + c == 2 * b,
    "sum above 30": lambda a, b, c: a + b + c > 30,
}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _random_triple(rng):
    return tuple(rng.randint(_LOW, _HIGH) for _ in range(3))


def _triple_where(rng, rule, wanted):
    for _ in range(5000):
        triple = _random_triple(rng)
        if rule(*triple) == wanted:
            return triple
    raise RuntimeError("no triple found")  # every rule holds and fails often in 1..20


def _labels(rule, triples):
    return "".join("Y" if rule(*t) else "N" for t in triples)


class TripleRuleEnv:
    """Multi-turn: ask whether triples fit the rule, then label every test triple at once."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        name = rng.choice(sorted(_RULES))
        rule = _RULES[name]
        # A test set on which every other candidate rule gives different labels, so only the
        # true rule (not a lookalike) classifies it correctly.
        while True:
            tests = [_triple_where(rng, rule, rng.random() < 0.5) for _ in range(_TEST_SIZE)]
            answer = _labels(rule, tests)
            distinct = all(
                _labels(other, tests) != answer for key, other in _RULES.items() if key != name
            )
            if 3 <= answer.count("Y") <= 5 and distinct and len(set(tests)) == _TEST_SIZE:
                break
        while True:
            fits, misses = _triple_where(rng, rule, True), _triple_where(rng, rule, False)
            if fits not in tests and misses not in tests:
                break
        self._rule, self._tests, self._answer = rule, tests, answer
        self._turn = 0
        self._done = False
        listing = "\n".join(f"{i}. {a} {b} {c}" for i, (a, b, c) in enumerate(tests, start=1))
        observation = (
            "A hidden rule says which ordered triples of integers (a, b, c) fit. It is one simple "
            "property of the triple, about order, parity, equality, sums or multiples of 3. "
            f"For example, {fits[0]} {fits[1]} {fits[2]} fits and "
            f"{misses[0]} {misses[1]} {misses[2]} does not.\n"
            "Each turn you may test a triple of integers from 0 to 99 by answering "
            "\\boxed{a b c} (for example \\boxed{4 9 16}); I say whether it fits. The test "
            "triples below cannot be queried. When ready, classify all of them in order with "
            f"Y (fits) or N (does not), written like \\boxed{{answer {'N' * _TEST_SIZE}}}; between 3 "
            "and 5 of them fit. That answer ends the game: all correct wins, anything else loses. "
            "Test triples:\n"
            f"{listing}\nYou have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        query = re.fullmatch(r"\(?\s*(\d+)\s*[, ]\s*(\d+)\s*[, ]\s*(\d+)\s*\)?", content)
        answer = re.fullmatch(r"answer\s*([YNyn\s,]+)", content, re.IGNORECASE)
        reward, terminated = 0.0, False
        if query:
            triple = tuple(int(x) for x in query.groups())
            if max(triple) > 99:
                observation = "Each number of a query must be from 0 to 99."
            elif triple in self._tests:
                observation = f"{triple[0]} {triple[1]} {triple[2]} is a test triple; ask another."
            else:
                verdict = "fits" if self._rule(*triple) else "does not fit"
                observation = f"{triple[0]} {triple[1]} {triple[2]} {verdict}."
        elif answer and len(re.sub(r"[\s,]", "", answer.group(1))) == _TEST_SIZE:
            letters = re.sub(r"[\s,]", "", answer.group(1)).upper()
            terminated = True
            if letters == self._answer:
                observation, reward = "All test triples classified correctly!", 1.0
            else:
                wrong = sum(x != y for x, y in zip(letters, self._answer, strict=True))
                observation = f"{wrong} of the {_TEST_SIZE} labels are wrong; the game is lost."
        else:
            observation = (
                "Answer \\boxed{a b c} to test a triple, or \\boxed{answer ...} with "
                f"{_TEST_SIZE} letters Y/N to classify the test triples."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        return f"\\boxed{{answer {self._answer}}}"

    def close(self) -> None:
        self._done = True
