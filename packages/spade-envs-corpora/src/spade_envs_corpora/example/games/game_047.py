"""Task swaps: improve a worker-task assignment by swaps until its total cost is minimal."""

import itertools
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _swap_distance(a, b):
    """Fewest swaps turning assignment a into b: the size minus the number of cycles."""
    where = {task: worker for worker, task in enumerate(b)}
    seen, cycles = set(), 0
    for start in range(len(a)):
        if start not in seen:
            cycles += 1
            worker = start
            while worker not in seen:
                seen.add(worker)
                worker = where[a[worker]]
    return len(a) - cycles


def _greedy(costs):
    """Assign the cheapest remaining worker-task pair again and again."""
    n = len(costs)
    cells = sorted((costs[w][t], w, t) for w in range(n) for t in range(n))
    result, used_w, used_t = [None] * n, set(), set()
    for _, w, t in cells:
        if w not in used_w and t not in used_t:
            result[w] = t
            used_w.add(w)
            used_t.add(t)
    return tuple(result)


class TaskSwapEnv:
    """Multi-turn: swap two workers' tasks per turn; reaching the cheapest assignment wins.

    An assignment is a tuple: entry w is the task index of worker w + 1.
    """

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, size: int = 7, min_distance: int = 4, **kwargs):
        self.max_turns = max_turns
        self.size = max(4, min(size, 8))  # brute force over size! assignments
        self.min_distance = min(min_distance, self.size - 1)
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.size
        tasks = string.ascii_uppercase[:n]
        # Redraw until the cheapest assignment is unique and grabbing cheap cells misses it.
        while True:
            costs = [[rng.randint(1, 30) for _ in range(n)] for _ in range(n)]
            ranked = sorted(
                (sum(costs[w][t] for w, t in enumerate(p)), p)
                for p in itertools.permutations(range(n))
            )
            (best, target), runner_up = ranked[0], ranked[1][0]
            if runner_up > best and _greedy(costs) != target:
                break
        current = target
        while _swap_distance(current, target) < self.min_distance:
            current = tuple(rng.sample(range(n), n))
        self._costs, self._target, self._best = costs, target, best
        self._start, self._current = current, current
        self._turn = 0
        self._done = False
        header = "        " + " ".join(f"{t:>3}" for t in tasks)
        rows = "\n".join(
            f"worker {w + 1}" + " ".join(f"{c:>3}" for c in costs[w]) for w in range(n)
        )
        observation = (
            f"Each of {n} workers does exactly one of the tasks {tasks[0]}-{tasks[-1]}, and each "
            f"task is done by exactly one worker. The cost of each worker on each task:\n"
            f"{header}\n{rows}\nEach turn swap the tasks of two workers by answering "
            "\\boxed{swap I J}, for example \\boxed{swap 2 5}. You win as soon as the total cost "
            f"is the lowest possible. You have {self.max_turns} turns.\n" + self._where()
        )
        return observation, self._info()

    def _total(self) -> int:
        return sum(self._costs[w][t] for w, t in enumerate(self._current))

    def _where(self) -> str:
        tasks = string.ascii_uppercase
        pairs = ", ".join(f"{w + 1}:{tasks[t]}" for w, t in enumerate(self._current))
        return f"Now {pairs}; total cost {self._total()}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        match = re.fullmatch(r"swap\s*(\d+)\s*[, ]\s*(\d+)", (_last_boxed(action) or "").lower())
        reward, terminated = 0.0, False
        n = self.size
        if not match:
            observation = (
                "Answer with two worker numbers as \\boxed{swap I J}, for example "
                "\\boxed{swap 2 5}. " + self._where()
            )
        else:
            i, j = int(match.group(1)) - 1, int(match.group(2)) - 1
            if not (0 <= i < n and 0 <= j < n) or i == j:
                observation = f"Give two different workers from 1 to {n}. " + self._where()
            else:
                current = list(self._current)
                current[i], current[j] = current[j], current[i]
                self._current = tuple(current)
                observation = self._where()
                if self._total() == self._best:
                    observation += " That is the lowest possible cost!"
                    reward, terminated = 1.0, True
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "cost": self._total() if hasattr(self, "_costs") else None}

    def solution(self) -> str:
        current, lines = list(self._start), []
        for w, task in enumerate(self._target):
            if current[w] != task:
                other = current.index(task)
                current[w], current[other] = current[other], current[w]
                lines.append(f"\\boxed{{swap {w + 1} {other + 1}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
