"""Three-colouring: colour a map graph with red, green and blue so no edge joins equal colours."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_PAIR = re.compile(r"([A-Za-z])\s*[=:]?\s*([RGBrgb])")
_COLOURS = "RGB"
_NAMES = {"R": "red", "G": "green", "B": "blue"}


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _count_colourings(n, adjacency, fixed, limit=2):
    colour = dict(fixed)
    order = sorted(range(n), key=lambda v: -len(adjacency[v]))

    def search(index):
        while index < n and order[index] in colour:
            index += 1
        if index == n:
            return 1
        v = order[index]
        total = 0
        for c in _COLOURS:
            if all(colour.get(u) != c for u in adjacency[v]):
                colour[v] = c
                total += search(index + 1)
                del colour[v]
                if total >= limit:
                    break
        return total

    return search(0)


class ThreeColouringEnv:
    """Multi-turn: colour nodes a few at a time; every turn lists the clashing edges."""

    skill = "Logic"

    def __init__(self, max_turns: int = 10, num_nodes: int = 12, **kwargs):
        self.max_turns = max_turns
        self.num_nodes = max(6, min(num_nodes, 20))
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        n = self.num_nodes
        names = string.ascii_uppercase[:n]
        while True:
            planted = {v: _COLOURS[v % 3] for v in range(n)}
            nodes = list(range(n))
            rng.shuffle(nodes)
            planted = {v: planted[nodes[v]] for v in range(n)}
            fixed = {}
            for c in _COLOURS:
                fixed[rng.choice([v for v in range(n) if planted[v] == c])] = c
            candidates = [
                (u, v) for u in range(n) for v in range(u + 1, n) if planted[u] != planted[v]
            ]
            rng.shuffle(candidates)
            adjacency = {v: set() for v in range(n)}
            edges = []
            for u, v in candidates:
                adjacency[u].add(v)
                adjacency[v].add(u)
                edges.append((u, v))
                if len(edges) >= n and _count_colourings(n, adjacency, fixed) == 1:
                    break
            if len(edges) <= 2 * n + 4:
                break
        self._names = names
        self._planted = planted
        self._fixed = fixed
        self._adjacency = adjacency
        self._edges = sorted(edges)
        self._colour = dict(fixed)
        self._turn = 0
        self._done = False
        listing = "\n".join(
            f"{names[v]}: " + ", ".join(names[u] for u in sorted(adjacency[v])) for v in range(n)
        )
        given = ", ".join(f"{names[v]} is {_NAMES[c]}" for v, c in sorted(fixed.items()))
        observation = (
            f"Colour the {n} nodes {names[0]} to {names[-1]} of this graph red (R), green (G) or "
            "blue (B) so that no two neighbours share a colour. Neighbours of each node:\n"
            f"{listing}\nAlready fixed (cannot change): {given}. Exactly one colouring works. "
            "Each turn colour or recolour any nodes, for example \\boxed{A=R, D=G, K=B}; after "
            "every turn you see the current colouring and every edge whose ends share a colour. "
            f"Colour every node with no clash within {self.max_turns} turns to win."
        )
        return observation, self._info()

    def _render(self):
        return " ".join(
            f"{self._names[v]}={self._colour.get(v, '?')}" for v in range(self.num_nodes)
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        pairs = _PAIR.findall(content)
        leftover = _PAIR.sub("", content).replace(",", "").replace(";", "").strip()
        reward, terminated = 0.0, False
        if not pairs or leftover:
            observation = (
                "Give node=colour pairs inside \\boxed{...}, colours R, G or B, for example "
                "\\boxed{A=R, D=G}."
            )
        else:
            notes = []
            for name, colour in pairs:
                v = self._names.find(name.upper())
                if v < 0:
                    notes.append(f"There is no node {name.upper()}.")
                elif v in self._fixed:
                    notes.append(f"{name.upper()} is fixed.")
                else:
                    self._colour[v] = colour.upper()
            clashes = [
                f"{self._names[u]}-{self._names[v]}"
                for u, v in self._edges
                if u in self._colour and self._colour.get(u) == self._colour.get(v)
            ]
            observation = " ".join(dict.fromkeys(notes)) + ("\n" if notes else "")
            observation += f"Colouring: {self._render()}\n"
            observation += "Clashing edges: " + (", ".join(clashes) if clashes else "none") + "."
            if not clashes and len(self._colour) == self.num_nodes:
                observation += " Every node is coloured with no clash. You win!"
                reward, terminated = 1.0, True
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        free = [v for v in range(self.num_nodes) if v not in self._fixed]
        chunks = [free[i : i + 4] for i in range(0, len(free), 4)]
        return "\n".join(
            "\\boxed{" + ", ".join(f"{self._names[v]}={self._planted[v]}" for v in chunk) + "}"
            for chunk in chunks
        )

    def close(self) -> None:
        self._done = True
