"""Edge discovery: force quantities of a hidden linear causal system, then list its direct links."""

import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NAMES = "ABCDE"
_WEIGHTS = [-3, -2, -1, 1, 2, 3]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _parse_edges(content):
    """A set of (cause, effect) pairs from 'A>B, C>D' or 'none'; None when it is not that."""
    text = content.strip().upper()
    if text == "NONE":
        return set()
    parts = [p for p in re.split(r"[\s,;]+", text) if p]
    if not parts:
        return None
    edges = set()
    for part in parts:
        match = re.fullmatch(r"([A-E])\s*(?:>|->|→)\s*([A-E])", part)
        if not match or match.group(1) == match.group(2):
            return None
        edges.add((match.group(1), match.group(2)))
    return edges


class EdgeDiscoveryEnv:
    """Multi-turn: do() experiments on five linked quantities, then one answer naming every edge.

    Each quantity is its own constant plus a weighted sum of its direct causes. Forcing one
    quantity moves everything downstream of it, directly or through others, so telling direct
    links from indirect ones takes holding the middle quantities fixed or computing with the
    measured effects.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def _values(self, forced: dict) -> dict:
        values = {}
        for name in self._order:
            if name in forced:
                values[name] = forced[name]
            else:
                values[name] = self._base[name] + sum(
                    weight * values[cause] for cause, weight in self._causes[name].items()
                )
        return values

    def _show(self, values: dict) -> str:
        return ", ".join(f"{name}={values[name]}" for name in _NAMES)

    def _total_effects_visible(self) -> bool:
        """Every ancestor must visibly move its descendants (no paths cancelling out)."""
        natural = self._values({})
        for i, cause in enumerate(self._order):
            moved = self._values({cause: natural[cause] + 1})
            reach = {cause}
            for effect in self._order[i + 1 :]:
                if any(c in reach for c in self._causes[effect]):
                    reach.add(effect)
                    if moved[effect] == natural[effect]:
                        return False
        return True

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        while True:
            self._order = rng.sample(_NAMES, len(_NAMES))  # hidden causal order
            self._base = {name: rng.randint(-9, 9) for name in _NAMES}
            self._causes = {name: {} for name in _NAMES}
            for j, effect in enumerate(self._order):
                for cause in self._order[:j]:
                    if rng.random() < 0.4:
                        self._causes[effect][cause] = rng.choice(_WEIGHTS)
            self._edges = {(c, e) for e in _NAMES for c in self._causes[e]}
            natural = self._values({})
            if (
                3 <= len(self._edges) <= 7
                and all(abs(v) <= 300 for v in natural.values())
                and self._total_effects_visible()
            ):
                break
        self._natural = natural
        self._turn = 0
        self._done = False
        observation = (
            f"Five integer quantities {', '.join(_NAMES)} are linked by hidden causal rules: each "
            "is its own constant plus a weighted sum (weights are nonzero integers) of its direct "
            "causes, with no feedback loops. Left alone they read "
            f"{self._show(natural)}.\n"
            "Each turn you may run one experiment that forces one or more quantities to values "
            "from -50 to 50 and shows the resulting values of all five, for example "
            "\\boxed{do A=3} or \\boxed{do A=3 C=0}. A forced quantity ignores its own rule; the "
            "others keep theirs.\n"
            "Goal: name every direct causal link, cause first, for example \\boxed{A>C, D>B} "
            "(or \\boxed{none}). A link X>Y means X appears in the rule of Y; a path through a "
            "third quantity is not a direct link. That answer ends the game: exactly the right "
            f"set wins, anything else loses. You have {self.max_turns} turns, the answer included."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        reward, terminated = 0.0, False
        forced = self._parse_do(content)
        edges = None if forced is not None else _parse_edges(content)
        if forced:
            shown = " and ".join(f"{k} forced to {v}" for k, v in sorted(forced.items()))
            observation = f"With {shown}: {self._show(self._values(forced))}."
        elif edges is not None:
            terminated = True
            if edges == self._edges:
                observation, reward = "Exactly the hidden links!", 1.0
            else:
                observation = "That is not the set of direct links. The game is lost."
        else:
            observation = (
                "Answer \\boxed{do X=v} (several X=v allowed, -50 <= v <= 50) to experiment, or "
                "\\boxed{A>B, C>D} listing every direct link (or \\boxed{none})."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    @staticmethod
    def _parse_do(content):
        match = re.fullmatch(r"do\s+(.+)", content.strip(), re.IGNORECASE)
        if not match:
            return None
        forced = {}
        for part in re.split(r"[\s,;]+", match.group(1).strip()):
            if not part:
                continue
            pair = re.fullmatch(r"([A-Ea-e])=(-?\d+)", part)
            if not pair or not -50 <= int(pair.group(2)) <= 50:
                return None
            forced[pair.group(1).upper()] = int(pair.group(2))
        return forced or None

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        lines = []
        for name in self._order[:-1]:
            value = self._natural[name] + 1
            if abs(value) > 50:
                value = 1
            lines.append(f"\\boxed{{do {name}={value}}}")
        edges = ", ".join(f"{c}>{e}" for c, e in sorted(self._edges)) or "none"
        lines.append(f"\\boxed{{{edges}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
