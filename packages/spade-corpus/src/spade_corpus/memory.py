"""Environment memory: accepted environments with their measured difficulty, for designer prompts.

The memory holds at most ``capacity`` entries. When full, adding an entry evicts the oldest
entry (lowest ``cycle``, then earliest added) of the skill that has the most entries, so no
skill is crowded out. Sampling for a prompt returns three groups:

* **frontier** (positive examples): win rate inside ``band`` (default 0.15–0.85), highest
  hint-based regret first, taken round-robin across skills so one skill does not fill the list;
* **too easy** (negative): win rate above ``easy_above`` (default 0.9);
* **too hard** (negative): win rate below ``hard_below`` (default 0.1).

Negative examples are drawn at random, seeded from ``(seed, index)``. The memory persists as one
JSON file written atomically, and :meth:`EnvironmentMemory.load` resumes it exactly.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import spade_envs as se

__all__ = ["MemoryEntry", "MemorySample", "EnvironmentMemory", "code_excerpt"]

FORMAT_VERSION = 1


def code_excerpt(source: str, max_lines: int = 40, max_chars: int = 2000) -> str:
    """The start of an environment's source, cut at a line boundary, for prompts."""
    lines = source.strip().splitlines()
    excerpt = "\n".join(lines[:max_lines])
    if len(excerpt) > max_chars:
        excerpt = excerpt[:max_chars].rsplit("\n", 1)[0]
    if len(lines) > max_lines or len(excerpt) < len(source.strip()):
        excerpt += "\n# …"
    return excerpt


@dataclass(frozen=True)
class MemoryEntry:
    """One accepted environment: its code excerpt, skill, agent win rate, regret and cycle."""

    env_id: str
    skill: str
    code_excerpt: str
    win_rate: float
    regret: float
    cycle: int
    hint: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.win_rate <= 1.0:
            raise ValueError(f"{self.env_id}: win_rate {self.win_rate} is outside [0, 1]")


@dataclass(frozen=True)
class MemorySample:
    """What one designer prompt gets from the memory."""

    frontier: list[MemoryEntry] = field(default_factory=list)
    too_easy: list[MemoryEntry] = field(default_factory=list)
    too_hard: list[MemoryEntry] = field(default_factory=list)


class EnvironmentMemory:
    """A bounded, skill-balanced store of accepted environments (see the module docstring)."""

    def __init__(
        self,
        capacity: int = 256,
        *,
        band: tuple[float, float] = (0.15, 0.85),
        easy_above: float = 0.9,
        hard_below: float = 0.1,
        seed: int = 0,
    ):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if not 0.0 <= band[0] < band[1] <= 1.0:
            raise ValueError(f"band must satisfy 0 <= low < high <= 1, got {band}")
        self.capacity, self.band = capacity, (float(band[0]), float(band[1]))
        self.easy_above, self.hard_below, self.seed = easy_above, hard_below, seed
        self._entries: dict[str, MemoryEntry] = {}  # insertion order = age among equal cycles

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._entries

    def entries(self) -> list[MemoryEntry]:
        return list(self._entries.values())

    def add(self, entry: MemoryEntry) -> MemoryEntry | None:
        """Add or replace an entry; returns the evicted entry, if any."""
        evicted = None
        if entry.env_id not in self._entries and len(self._entries) >= self.capacity:
            crowded = Counter(e.skill for e in self._entries.values()).most_common(1)[0][0]
            victim = min(
                (e for e in self._entries.values() if e.skill == crowded), key=lambda e: e.cycle
            )
            evicted = self._entries.pop(victim.env_id)
        self._entries.pop(entry.env_id, None)
        self._entries[entry.env_id] = entry
        return evicted

    def update(self, env_id: str, *, win_rate: float, regret: float, cycle: int) -> MemoryEntry:
        """New difficulty statistics for a stored environment (e.g. after more episodes)."""
        if env_id not in self._entries:
            raise KeyError(f"{env_id!r} is not in the memory")
        old = self._entries[env_id]
        new = MemoryEntry(
            old.env_id, old.skill, old.code_excerpt, win_rate, regret, cycle, old.hint
        )
        self._entries[env_id] = new
        return new

    def sample(
        self,
        n_frontier: int = 2,
        n_easy: int = 1,
        n_hard: int = 1,
        *,
        index: int = 0,
        skill: str | None = None,
    ) -> MemorySample:
        """Examples for prompt ``index``; ``skill`` restricts every group to that skill."""
        pool = [e for e in self._entries.values() if skill is None or e.skill == skill]
        low, high = self.band
        by_skill: dict[str, list[MemoryEntry]] = {}
        for e in sorted(
            (e for e in pool if low <= e.win_rate <= high), key=lambda e: (-e.regret, e.env_id)
        ):
            by_skill.setdefault(e.skill, []).append(e)
        # Round-robin over skills, best regret first within each skill and across the first picks.
        order = sorted(by_skill, key=lambda s: (-by_skill[s][0].regret, s))
        frontier: list[MemoryEntry] = []
        depth = 0
        while len(frontier) < n_frontier and any(len(v) > depth for v in by_skill.values()):
            frontier.extend(by_skill[s][depth] for s in order if len(by_skill[s]) > depth)
            depth += 1
        rng = random.Random(f"spade-memory:{self.seed}:{index}")
        easy = sorted((e for e in pool if e.win_rate > self.easy_above), key=lambda e: e.env_id)
        hard = sorted((e for e in pool if e.win_rate < self.hard_below), key=lambda e: e.env_id)
        return MemorySample(
            frontier[:n_frontier],
            rng.sample(easy, min(n_easy, len(easy))),
            rng.sample(hard, min(n_hard, len(hard))),
        )

    def to_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "capacity": self.capacity,
            "band": list(self.band),
            "easy_above": self.easy_above,
            "hard_below": self.hard_below,
            "seed": self.seed,
            "entries": [asdict(e) for e in self._entries.values()],
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the memory as JSON atomically (temp file in the same directory, then rename)."""
        return se.atomic_write_text(path, json.dumps(self.to_dict(), ensure_ascii=False, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EnvironmentMemory:
        """Resume a memory saved by :meth:`save`."""
        target = Path(path)
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no environment memory at {target}; start a new one with EnvironmentMemory()"
            ) from None
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{target}: not a valid memory file ({exc.msg} at line {exc.lineno})"
            ) from None
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{target}: memory format {data.get('format_version')!r}, expected {FORMAT_VERSION}"
            )
        memory = cls(
            data["capacity"],
            band=tuple(data["band"]),
            easy_above=data["easy_above"],
            hard_below=data["hard_below"],
            seed=data["seed"],
        )
        for row in data["entries"]:
            memory._entries[row["env_id"]] = MemoryEntry(**row)
        return memory
