"""Tower cover: reach every village with the fewest radio towers, one tower per turn."""

import functools
import itertools
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _greedy_count(sites, villages):
    """Towers used by always building the one that reaches the most uncovered villages."""
    left, count = set(villages), 0
    while left:
        name = max(sorted(sites), key=lambda s: len(sites[s] & left))
        left -= sites[name]
        count += 1
    return count


class TowerCoverEnv:
    """Multi-turn: build one tower per turn; covering all villages with the fewest towers wins.

    `_sites` maps a site letter to the set of villages its tower reaches.
    """

    skill = "Optimization"

    def __init__(
        self,
        max_turns: int = 10,
        num_villages: int = 15,
        num_sites: int = 12,
        max_attempts: int = 2,
        **kwargs,
    ):
        self.max_turns = max_turns
        self.num_villages = max(6, min(num_villages, 30))
        self.num_sites = max(5, min(num_sites, 14))  # brute force over 2^sites selections
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        villages = range(1, self.num_villages + 1)
        names = string.ascii_uppercase[: self.num_sites]
        # Redraw until the smallest cover is unique, needs 3+ towers and greed overshoots it.
        while True:
            sites = {
                name: set(rng.sample(villages, rng.randint(3, self.num_villages // 3 + 1)))
                for name in names
            }
            masks = {n: sum(1 << v for v in sites[n]) for n in names}  # bit v: village v
            full, covers = sum(1 << v for v in villages), []
            for size in range(1, len(names) + 1):
                covers = [
                    combo
                    for combo in itertools.combinations(names, size)
                    if functools.reduce(int.__or__, (masks[n] for n in combo)) == full
                ]
                if covers:
                    break
            if len(covers) == 1 and size >= 3 and _greedy_count(sites, villages) > size:
                break
        self._sites, self._cover = sites, covers[0]
        self._turn = 0
        self._attempts = 0
        self._built = []
        self._done = False
        listing = "\n".join(
            f"{name}: reaches {', '.join(map(str, sorted(sites[name])))}" for name in names
        )
        observation = (
            f"Villages 1 to {self.num_villages} need radio coverage. A tower can be built at "
            f"any of these sites, reaching the villages listed:\n{listing}\nBuild towers one "
            f"per turn by answering a site letter, for example \\boxed{{{names[0]}}}. You win "
            "if every village is reached using the fewest towers possible. Once you have built "
            "that many towers without reaching every village, the attempt fails and all towers "
            f"are removed. You have {self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def _uncovered(self) -> list:
        reached = set().union(*(self._sites[n] for n in self._built))
        return [v for v in range(1, self.num_villages + 1) if v not in reached]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        name = (_last_boxed(action) or "").strip().upper()
        reward, terminated = 0.0, False
        if name not in self._sites:
            observation = (
                f"Answer with one site letter from {min(self._sites)} to {max(self._sites)} "
                "inside \\boxed{...}, for example \\boxed{C}."
            )
        elif name in self._built:
            observation = f"A tower already stands at {name}; choose another site."
        else:
            self._built.append(name)
            missing = self._uncovered()
            built = "".join(self._built)
            if not missing and len(self._built) == len(self._cover):
                observation = f"Towers {built} reach every village with the fewest towers!"
                reward, terminated = 1.0, True
            elif len(self._built) >= len(self._cover):
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                observation = (
                    f"Towers {built} leave villages {', '.join(map(str, missing))} unreached, "
                    f"and {len(self._built)} towers is already the fewest possible; the attempt "
                    "fails. "
                    + (
                        "No attempts left."
                        if terminated
                        else f"All towers are removed; {left} attempt(s) left."
                    )
                )
                self._built = []
            else:
                observation = (
                    f"Towers {built} built; villages {', '.join(map(str, missing))} are still "
                    "unreached."
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "built": "".join(getattr(self, "_built", []))}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{name}}}" for name in self._cover)

    def close(self) -> None:
        self._done = True
