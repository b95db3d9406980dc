"""Crate packing: pack parcels into the fewest crates, filling one crate per turn."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _first_fit_decreasing(sizes, capacity):
    """Crates used by putting the largest parcels first into the first crate with room."""
    loads = []
    for size in sorted(sizes, reverse=True):
        for i, load in enumerate(loads):
            if load + size <= capacity:
                loads[i] += size
                break
        else:
            loads.append(size)
    return len(loads)


class CratePackingEnv:
    """Multi-turn: each turn fills one crate; packing everything in the fewest crates wins.

    The parcels are cut from `num_crates` full crates, so that many is the fewest possible.
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, num_crates: int = 4, max_attempts: int = 2, **kwargs):
        self.max_turns = max_turns
        self.num_crates = max(2, min(num_crates, 6))
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Cut full crates into parcels, redrawn until largest-first packing needs a crate more.
        while True:
            capacity = rng.randint(20, 30)
            crates = []
            for _ in range(self.num_crates):
                parts = rng.randint(2, 4)
                cuts = sorted(rng.sample(range(3, capacity - 2), parts - 1))
                sizes = [b - a for a, b in zip([0, *cuts], [*cuts, capacity], strict=True)]
                crates.append(sizes)
            if all(min(sizes) >= 2 for sizes in crates):
                slack = rng.randint(0, 2)
                low = [sizes for sizes in crates if sizes[0] > slack + 1]
                if low:
                    low[0][0] -= slack
                flat = [size for sizes in crates for size in sizes]
                if _first_fit_decreasing(flat, capacity) > self.num_crates:
                    break
        order = list(range(len(flat)))
        rng.shuffle(order)
        names = string.ascii_uppercase[: len(flat)]
        self._sizes = {names[i]: flat[j] for i, j in enumerate(order)}
        by_index = {j: names[i] for i, j in enumerate(order)}
        self._plan, index = [], 0
        for sizes in crates:
            self._plan.append("".join(sorted(by_index[index + k] for k in range(len(sizes)))))
            index += len(sizes)
        self._capacity = capacity
        self._crates = []
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = ", ".join(f"{name} {size}" for name, size in self._sizes.items())
        observation = (
            f"Pack these parcels (letter and size) into crates holding at most {capacity} "
            f"units each: {listing}. Each turn fill one new crate by answering the letters of "
            f"the parcels it gets, for example \\boxed{{{names[0]}{names[2]}}}; a filled crate "
            "stays closed. You win if every parcel is packed using the fewest crates "
            "possible. Once you have filled that many crates with parcels left over, the "
            "attempt fails and all crates are emptied. You have "
            f"{self.max_attempts} attempts within {self.max_turns} turns."
        )
        return observation, self._info()

    def _left(self) -> list:
        packed = "".join(self._crates)
        return [name for name in self._sizes if name not in packed]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        letters = re.sub(r"[\s,;+]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        left = self._left()
        if (
            not letters
            or any(ch not in self._sizes for ch in letters)
            or len(set(letters)) < len(letters)
        ):
            observation = (
                "Answer with distinct parcel letters inside \\boxed{...}, for example \\boxed{AC}."
            )
        elif any(ch not in left for ch in letters):
            taken = ", ".join(ch for ch in letters if ch not in left)
            observation = f"Parcel(s) {taken} are already packed; choose from {''.join(left)}."
        elif sum(self._sizes[ch] for ch in letters) > self._capacity:
            load = sum(self._sizes[ch] for ch in letters)
            observation = f"{letters} weigh {load}, over the crate limit of {self._capacity}."
        else:
            self._crates.append(letters)
            load = sum(self._sizes[ch] for ch in letters)
            left = self._left()
            count = len(self._crates)
            if not left and count <= self.num_crates:
                observation = f"Crate {count}: {letters} ({load}). All packed in the fewest crates!"
                reward, terminated = 1.0, True
            elif count >= self.num_crates:
                self._attempts += 1
                remaining = self.max_attempts - self._attempts
                terminated = remaining <= 0
                observation = (
                    f"Crate {count}: {letters} ({load}). Parcels {''.join(left)} are left over, "
                    f"and {count} crates is already the fewest possible; the attempt fails. "
                    + (
                        "No attempts left."
                        if terminated
                        else f"All crates are emptied; {remaining} attempt(s) left."
                    )
                )
                self._crates = []
            else:
                observation = (
                    f"Crate {count}: {letters} ({load}). Still to pack: "
                    + ", ".join(f"{ch} {self._sizes[ch]}" for ch in left)
                    + "."
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "crates": list(getattr(self, "_crates", []))}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{crate}}}" for crate in self._plan)

    def close(self) -> None:
        self._done = True
