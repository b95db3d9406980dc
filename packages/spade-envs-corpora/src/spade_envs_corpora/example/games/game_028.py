"""Gate fault: find the one gate of a small Boolean circuit that computes the wrong function."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_TEST = re.compile(r"test\s*([01\s]+)", re.IGNORECASE)
_ACCUSE = re.compile(r"(?:faulty|accuse)\s*g\s*(\d+)\s*(?:is|=|:|as)?\s*([a-z]+)", re.IGNORECASE)
_TYPES = ["AND", "OR", "XOR", "NAND", "NOR", "XNOR"]
_INPUTS = "abcde"


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


_BASE = {"AND": "AND", "NAND": "AND", "OR": "OR", "NOR": "OR", "XOR": "XOR", "XNOR": "XOR"}


def _apply(kind, x, y):
    base = _BASE[kind]
    value = x & y if base == "AND" else x | y if base == "OR" else x ^ y
    return value ^ (base != kind)


def _table(gates, outputs, fault=None):
    """The outputs for every input vector (a is the high bit); fault = (gate, type it computes)."""
    n = len(_INPUTS)
    rows = []
    for vector in range(1 << n):
        signal = [(vector >> (n - 1 - i)) & 1 for i in range(n)]
        for k, (kind, a, b) in enumerate(gates):
            kind = fault[1] if fault is not None and fault[0] == k else kind
            signal.append(_apply(kind, signal[a], signal[b]))
        rows.append(tuple(signal[n + k] for k in outputs))
    return rows


def _random_circuit(rng, num_gates, num_outputs):
    n = len(_INPUTS)
    while True:
        gates, used = [], set()
        for k in range(num_gates):
            available = list(range(n + k))
            unused = [s for s in available if s not in used]
            a = rng.choice(unused[-3:]) if unused and rng.random() < 0.8 else rng.choice(available)
            b = rng.choice([s for s in available if s != a])
            used |= {a, b}
            gates.append((rng.choice(_TYPES), a, b))
        if all(s in used for s in range(n + num_gates - num_outputs)):
            return gates


def _greedy_tests(tables, truth):
    """Tests chosen to split the suspects as evenly as possible until only the truth is left."""
    alive = [c for c in tables if c != truth]
    tests = []
    while alive:
        best, best_worst = None, None
        for vector in range(len(tables[truth])):
            buckets = {}
            for c in [*alive, truth]:
                buckets[tables[c][vector]] = buckets.get(tables[c][vector], 0) + 1
            if best is None or max(buckets.values()) < best_worst:
                best, best_worst = vector, max(buckets.values())
        tests.append(best)
        alive = [c for c in alive if tables[c][best] == tables[truth][best]]
    return tests


class GateFaultEnv:
    """Multi-turn: apply input vectors, read the outputs, then name the faulty gate once."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, num_gates: int = 12, max_plan: int = 7, **kwargs):
        self.max_turns = max_turns
        self.num_gates = max(6, min(num_gates, 16))
        self.max_plan = max_plan
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(None if seed is None else f"logic_gate_fault:{seed}")
        m = self.num_gates
        outputs = list(range(m - 3, m))
        while True:
            gates = _random_circuit(rng, m, len(outputs))
            healthy = _table(gates, outputs)
            faults = [(k, t) for k in range(m) for t in _TYPES if t != gates[k][0]]
            tables = {f: _table(gates, outputs, f) for f in faults}
            rng.shuffle(faults)
            truth = next(
                (
                    f
                    for f in faults
                    if tables[f] != healthy
                    and all(tables[g] != tables[f] for g in faults if g != f)
                ),
                None,
            )
            if truth is not None:
                plan = _greedy_tests(tables, truth)
                if len(plan) <= self.max_plan:
                    break
        self._gates, self._outputs, self._fault = gates, outputs, truth
        self._table, self._plan = tables[truth], plan
        kind = next(t for t in _TYPES if t != gates[0][0] and (0, t) != truth)
        self._example = f"faulty G1 {kind}"  # a well-formed accusation that is surely wrong
        self._turn = 0
        self._tests = 0
        self._done = False
        names = list(_INPUTS) + [f"G{k + 1}" for k in range(m)]
        listing = "\n".join(
            f"G{k + 1} = {kind}({names[a]}, {names[b]})" for k, (kind, a, b) in enumerate(gates)
        )
        shown = ", ".join(f"G{k + 1}" for k in outputs)
        observation = (
            f"A circuit has inputs {', '.join(_INPUTS)} and {m} two-input gates, each computed "
            f"from inputs or earlier gates:\n{listing}\nOnly {shown} can be observed. Exactly one "
            "gate is faulty: it computes a different one of AND, OR, XOR, NAND, NOR, XNOR than "
            "its label says; every other gate works. Each turn either test the circuit with "
            "values for a to e, for example \\boxed{test 10110} (a=1, b=0, c=1, d=1, e=0), and "
            "read the outputs, or name the faulty gate and what it really computes, for example "
            f"\\boxed{{{self._example}}}. You may name a gate only once: right wins, wrong "
            f"loses. You have {self.max_turns} turns."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        test, accuse = _TEST.fullmatch(content), _ACCUSE.fullmatch(content)
        bits = re.sub(r"\s", "", test.group(1)) if test else ""
        reward, terminated = 0.0, False
        if test and len(bits) == len(_INPUTS):
            self._tests += 1
            values = self._table[int(bits, 2)]
            read = ", ".join(f"G{k + 1}={v}" for k, v in zip(self._outputs, values, strict=True))
            observation = f"Test {bits}: {read}."
        elif accuse and 1 <= int(accuse.group(1)) <= self.num_gates:
            k, kind = int(accuse.group(1)) - 1, accuse.group(2).upper()
            if kind not in _TYPES or kind == self._gates[k][0]:
                observation = (
                    f"Name the type G{k + 1} really computes inside \\boxed{{...}}: one of "
                    f"{', '.join(_TYPES)} other than its label {self._gates[k][0]}."
                )
            elif (k, kind) == self._fault:
                observation, reward, terminated = f"G{k + 1} computes {kind}. You win!", 1.0, True
            else:
                observation, terminated = f"G{k + 1} is not faulty that way. You lose.", True
        else:
            observation = (
                "Answer inside \\boxed{...} with a test of five bits for a to e, like "
                f"\\boxed{{test 10110}}, or a gate and its real type, like "
                f"\\boxed{{{self._example}}}; gates are G1 to G{self.num_gates}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "tests": getattr(self, "_tests", 0)}

    def solution(self) -> str:
        lines = [f"\\boxed{{test {vector:05b}}}" for vector in self._plan]
        k, kind = self._fault
        lines.append(f"\\boxed{{faulty G{k + 1} {kind}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
