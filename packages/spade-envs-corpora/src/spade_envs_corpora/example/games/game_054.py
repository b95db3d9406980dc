"""Fault root: find the one broken stage of a processing network by testing stage outputs."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_STAGES = 60
_SOURCES = 4


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _split_probe(candidates, upstream):
    """The stage whose test splits the candidate set most evenly (ties: lowest number)."""
    best, best_size = None, None
    for stage in sorted(upstream):
        inside = len(candidates & upstream[stage])
        worst = max(inside, len(candidates) - inside)
        if inside and inside < len(candidates) and (best_size is None or worst < best_size):
            best, best_size = stage, worst
    return best


def _worst_probes(candidates, upstream):
    """Tests the even-split strategy needs in the worst case to single out the fault."""
    if len(candidates) <= 1:
        return 0
    probe = _split_probe(candidates, upstream)
    if probe is None:
        return 99
    inside = candidates & upstream[probe]
    return 1 + max(_worst_probes(inside, upstream), _worst_probes(candidates - inside, upstream))


class FaultRootEnv:
    """Multi-turn: a bad output propagates downstream; tests of stage outputs narrow the cause.

    A stage's output is bad when the stage itself is broken or any of its inputs is bad, so a
    bad reading only says the fault is at or upstream of the tested stage, and a good reading
    clears the stage and everything upstream of it.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, max_tests_needed: int = 7, **kwargs):
        self.max_turns = max_turns
        self.max_tests_needed = max_tests_needed
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        while True:
            inputs = {k: [] for k in range(1, _SOURCES + 1)}
            for k in range(_SOURCES + 1, _STAGES + 1):
                count = 1 if rng.random() < 0.55 else 2
                pool = list(range(max(1, k - 12), k))
                inputs[k] = sorted(rng.sample(pool, min(count, len(pool))))
            upstream = {}  # stage -> the stage itself and all stages upstream of it
            for k in range(1, _STAGES + 1):
                upstream[k] = {k}.union(*(upstream[i] for i in inputs[k]))
            consumers = {i for k in inputs for i in inputs[k]}
            sinks = [k for k in range(1, _STAGES + 1) if k not in consumers]
            fault = rng.randint(1, _STAGES)
            bad = [s for s in sinks if fault in upstream[s]]
            if not bad:
                continue
            candidates = set.intersection(*(upstream[s] for s in bad))
            for s in sinks:
                if s not in bad:
                    candidates -= upstream[s]
            # Solvable in max_tests_needed tests whatever the fault (the turn limit may be lower).
            if (
                len(candidates) >= 8
                and _worst_probes(candidates, upstream) <= self.max_tests_needed
            ):
                break
        self._inputs, self._upstream, self._fault = inputs, upstream, fault
        self._candidates = candidates
        self._turn = 0
        self._done = False
        wiring = " ".join(
            f"{k}<{','.join(str(i) for i in inputs[k])}" for k in range(_SOURCES + 1, _STAGES + 1)
        )
        readings = ", ".join(f"{s} {'BAD' if s in bad else 'ok'}" for s in sinks)
        observation = (
            f"A processing network has {_STAGES} stages numbered 1 to {_STAGES}. Stages 1 to "
            f"{_SOURCES} read raw input; every other stage reads the outputs of the stages after "
            f"its '<' (so '9<3,7' means stage 9 reads stages 3 and 7):\n{wiring}\n"
            "Exactly one stage is broken. A stage's output is BAD when the stage is broken or any "
            "of its inputs is BAD; otherwise it is ok. The final outputs (stages nobody reads) "
            f"show: {readings}.\n"
            "Each turn you may test one stage's output with \\boxed{test 17}. When you know the "
            "broken stage, answer \\boxed{broken 17}; that answer ends the game: right wins, "
            f"wrong loses. You have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        match = re.fullmatch(r"(test|broken)\s+(\d+)", content, re.IGNORECASE)
        reward, terminated = 0.0, False
        if match and 1 <= int(match.group(2)) <= _STAGES:
            stage = int(match.group(2))
            if match.group(1).lower() == "test":
                state = "BAD" if self._fault in self._upstream[stage] else "ok"
                observation = f"Stage {stage} output: {state}."
            else:
                terminated = True
                if stage == self._fault:
                    observation, reward = f"Right: stage {stage} is the broken one!", 1.0
                else:
                    observation = f"Wrong: stage {stage} works. The game is lost."
        else:
            observation = (
                f"Answer \\boxed{{test k}} to test stage k (1 to {_STAGES}) or "
                "\\boxed{broken k} to name the broken stage."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        lines, candidates = [], set(self._candidates)
        while len(candidates) > 1:
            probe = _split_probe(candidates, self._upstream)
            lines.append(f"\\boxed{{test {probe}}}")
            if self._fault in self._upstream[probe]:
                candidates &= self._upstream[probe]
            else:
                candidates -= self._upstream[probe]
        lines.append(f"\\boxed{{broken {self._fault}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
