"""Clause repair: find the one assignment of twelve Boolean variables that satisfies a 3-CNF formula."""

import functools
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _satisfies(bits, clause):
    """bits: tuple of 0/1; clause: tuple of (variable index, wanted value)."""
    return any(bits[var] == want for var, want in clause)


def _describe(clause):
    return " | ".join(("" if want else "~") + f"x{var + 1}" for var, want in clause)


@functools.lru_cache(maxsize=4)
def _literal_sets(n):
    """For each literal (variable, value), the bit set of assignment codes where it holds."""
    sets = {}
    for var in range(n):
        for want in (0, 1):
            sets[(var, want)] = sum(
                1 << code for code in range(1 << n) if (code >> var) & 1 == want
            )
    return sets


class ClauseRepairEnv:
    """Few attempts: each wrong assignment reports which clauses it violates."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, num_vars: int = 12, max_attempts: int = 4, **kwargs):
        self.max_turns = max_turns
        self.num_vars = max(6, min(num_vars, 14))
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.num_vars
        planted_code = rng.randrange(1 << n)
        planted = tuple((planted_code >> i) & 1 for i in range(n))
        literal = _literal_sets(n)
        alive = ((1 << (1 << n)) - 1) & ~(1 << planted_code)
        clauses = []
        while alive:
            best, best_kill, best_set = None, 0, 0
            for _ in range(4):
                vars_ = sorted(rng.sample(range(n), 3))
                clause = tuple((v, rng.randrange(2)) for v in vars_)
                if not _satisfies(planted, clause):
                    continue
                sat = literal[clause[0]] | literal[clause[1]] | literal[clause[2]]
                kill = (alive & ~sat).bit_count()
                if kill > best_kill:
                    best, best_kill, best_set = clause, kill, sat
            if best is None:
                continue
            clauses.append(best)
            alive &= best_set
        rng.shuffle(clauses)
        self._planted = planted
        self._clauses = clauses
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = "\n".join(f"C{i + 1}: {_describe(c)}" for i, c in enumerate(clauses))
        observation = (
            f"Variables x1 to x{n} are each 0 (false) or 1 (true). '|' means or, '~' means not. "
            f"Exactly one assignment makes all {len(clauses)} clauses true:\n{listing}\n"
            f"Answer with the {n} values in order x1..x{n} as a string of 0s and 1s, for example "
            f"\\boxed{{{'01' * (n // 2)}{'0' * (n % 2)}}}. A wrong assignment is told which "
            f"clauses it breaks. You have {self.max_attempts} attempts within "
            f"{self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        n = self.num_vars
        content = re.sub(r"[\s,]", "", _last_boxed(action) or "")
        reward, terminated = 0.0, False
        if not re.fullmatch(r"[01]+", content) or len(content) != n:
            observation = (
                f"Give exactly {n} digits 0 or 1 (x1 first) inside \\boxed{{...}}, for example "
                f"\\boxed{{{'1' * n}}}."
            )
        else:
            bits = tuple(int(ch) for ch in content)
            broken = [i + 1 for i, c in enumerate(self._clauses) if not _satisfies(bits, c)]
            if not broken:
                observation, reward, terminated = "All clauses are satisfied. You win!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                shown = ", ".join(f"C{i}" for i in broken)
                observation = f"{content} breaks {len(broken)} clause(s): {shown}. " + (
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
        return "\\boxed{" + "".join(str(b) for b in self._planted) + "}"

    def close(self) -> None:
        self._done = True
