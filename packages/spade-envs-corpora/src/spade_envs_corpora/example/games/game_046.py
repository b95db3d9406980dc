"""Job order: sequence jobs on one machine to minimise the total weighted lateness."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _penalty(jobs, order):
    """Total weighted tardiness of an order; jobs maps a letter to (length, due, weight)."""
    clock = total = 0
    for name in order:
        length, due, weight = jobs[name]
        clock += length
        total += weight * max(0, clock - due)
    return total


def _optimum(jobs):
    """Best penalty, how many orders reach it, and one of them (a DP over sets of jobs done)."""
    names = sorted(jobs)
    full = (1 << len(names)) - 1
    best = {0: (0, 1, "")}
    for mask in range(1, full + 1):
        clock = sum(jobs[names[i]][0] for i in range(len(names)) if mask >> i & 1)
        entry = None
        for i, name in enumerate(names):
            if mask >> i & 1:
                cost, count, order = best[mask ^ (1 << i)]
                length, due, weight = jobs[name]
                cost += weight * max(0, clock - due)
                if entry is None or cost < entry[0]:
                    entry = (cost, count, order + name)
                elif cost == entry[0]:
                    entry = (cost, entry[1] + count, entry[2])
        best[mask] = entry
    return best[full]


class JobOrderEnv:
    """Order submissions with feedback: each wrong order gets every job's finish and penalty."""

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, num_jobs: int = 7, max_attempts: int = 5, **kwargs):
        self.max_turns = max_turns
        self.num_jobs = max(4, min(num_jobs, 10))
        self.max_attempts = max_attempts
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        names = string.ascii_uppercase[: self.num_jobs]
        # Redraw until the optimum is nearly unique and no simple sorting rule reaches it.
        while True:
            lengths = {name: rng.randint(2, 9) for name in names}
            total = sum(lengths.values())
            jobs = {
                name: (lengths[name], rng.randint(total // 4, total * 4 // 5), rng.randint(1, 4))
                for name in names
            }
            best, count, order = _optimum(jobs)
            rules = [  # due date, length, length per weight, slack
                {
                    n: (due, length / weight, length, due - length)[k]
                    for n, (length, due, weight) in jobs.items()
                }
                for k in range(4)
            ]
            if (
                best > 0
                and count <= 3
                and all(_penalty(jobs, sorted(names, key=rule.get)) > best for rule in rules)
            ):
                break
        self._jobs, self._best, self._order = jobs, best, order
        self._turn = 0
        self._attempts = 0
        self._done = False
        listing = "\n".join(
            f"{name}: takes {length}, due at {due}, weight {weight}"
            for name, (length, due, weight) in jobs.items()
        )
        observation = (
            f"One machine must run these {len(names)} jobs, one at a time without gaps, starting "
            f"at time 0:\n{listing}\nA job finishing after its due time is late by the "
            "difference and costs its weight times that lateness; an on-time job costs nothing. "
            "Find an order with the smallest possible total cost. Answer with all the job "
            f"letters in running order, for example \\boxed{{{names[::-1]}}}. Any order with the "
            f"lowest cost wins. You have {self.max_attempts} attempts within {self.max_turns} "
            "turns; a wrong order is told each job's finish time and cost."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        order = re.sub(r"[\s,;>\-]", "", _last_boxed(action) or "").upper()
        reward, terminated = 0.0, False
        if sorted(order) != sorted(self._jobs):
            observation = (
                "Answer with every job letter exactly once, in running order, inside "
                f"\\boxed{{...}}, for example \\boxed{{{''.join(sorted(self._jobs))}}}."
            )
        else:
            cost = _penalty(self._jobs, order)
            if cost == self._best:
                observation, reward, terminated = f"Optimal: total cost {cost}!", 1.0, True
            else:
                self._attempts += 1
                left = self.max_attempts - self._attempts
                terminated = left <= 0
                clock, parts = 0, []
                for name in order:
                    length, due, weight = self._jobs[name]
                    clock += length
                    parts.append(f"{name} ends {clock} cost {weight * max(0, clock - due)}")
                observation = (
                    f"{order}: "
                    + ", ".join(parts)
                    + f"; total cost {cost}, not the lowest. "
                    + ("No attempts left." if terminated else f"{left} attempt(s) left.")
                )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "attempts": getattr(self, "_attempts", 0)}

    def solution(self) -> str:
        return f"\\boxed{{{self._order}}}"

    def close(self) -> None:
        self._done = True
