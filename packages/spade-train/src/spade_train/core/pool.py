"""The environment pool: validated environments the agent trains on.

Admission deduplicates by the SHA-256 of the source (whitespace at the ends ignored). Each
entry keeps running play statistics (wins and returns with and without the hint). Entries
whose unhinted win rate reaches ``retire_win_rate`` after ``min_plays`` unhinted episodes are
retired as saturated. When the pool is full, the entry least useful for training (the
lowest sampling weight, oldest first on ties) makes room.

Sampling is ``uniform`` or ``frontier``: the latter weights an entry by how close its win rate
is to 0.5 plus its positive regret, with unplayed entries at full weight, so the agent trains
where it can still learn.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

WIN_THRESHOLD = 1.0
"""An episode is won when its return reaches this (the contract's success reward)."""


def measured_difficulty(
    hinted: Sequence[float], unhinted: Sequence[float], threshold: float = WIN_THRESHOLD
) -> tuple[float, float]:
    """``(win rate without the hint, hint regret)`` of one environment's plays: the one
    definition the pool's running statistics and the environment memory share. Regret is
    ``mean(hinted) - mean(unhinted)``, 0 when either side is empty."""
    win = sum(r >= threshold for r in unhinted) / len(unhinted) if unhinted else 0.0
    if not hinted or not unhinted:
        return win, 0.0
    return win, sum(hinted) / len(hinted) - sum(unhinted) / len(unhinted)


def source_digest(source: str) -> str:
    """The dedup key of a source: SHA-256 of its text with surrounding whitespace removed."""
    return hashlib.sha256(source.strip().encode("utf-8")).hexdigest()


@dataclass
class PoolEntry:
    """One environment in the pool, with its running play statistics."""

    env_id: str
    source: str
    class_name: str | None
    hint: str | None
    skill: str
    max_turns: int
    cycle_added: int
    origin: str
    tools: list[dict[str, Any]] | None = None
    plays: int = 0
    hinted_plays: int = 0
    wins_nohint: int = 0
    wins_hint: int = 0
    return_sum_nohint: float = 0.0
    return_sum_hint: float = 0.0
    last_cycle: int | None = None
    digest: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = source_digest(self.source)

    @property
    def win_rate_nohint(self) -> float | None:
        return self.wins_nohint / self.plays if self.plays else None

    @property
    def win_rate_hint(self) -> float | None:
        return self.wins_hint / self.hinted_plays if self.hinted_plays else None

    @property
    def regret(self) -> float | None:
        if not self.plays or not self.hinted_plays:
            return None
        return self.return_sum_hint / self.hinted_plays - self.return_sum_nohint / self.plays


class EnvPool:
    """A bounded, deduplicated set of :class:`PoolEntry`, sampled for play each cycle."""

    def __init__(
        self,
        capacity: int = 512,
        retire_win_rate: float = 0.9,
        min_plays: int = 4,
        sampling: Literal["uniform", "frontier"] = "frontier",
        seed: int = 0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"pool capacity must be >= 1, got {capacity}")
        if sampling not in ("uniform", "frontier"):
            raise ValueError(f"pool sampling must be 'uniform' or 'frontier', got {sampling!r}")
        self.capacity = capacity
        self.retire_win_rate = retire_win_rate
        self.min_plays = min_plays
        self.sampling = sampling
        self.seed = seed
        self._entries: dict[str, PoolEntry] = {}
        self._digests: dict[str, str] = {}
        self.retired: list[str] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._entries

    def __iter__(self):
        return iter(list(self._entries.values()))

    def get(self, env_id: str) -> PoolEntry:
        return self._entries[env_id]

    def weight(self, entry: PoolEntry) -> float:
        """Sampling weight of ``entry`` (1 for everything under ``uniform``)."""
        if self.sampling == "uniform" or entry.win_rate_nohint is None:
            return 1.0
        p = entry.win_rate_nohint
        return 0.05 + 4.0 * p * (1.0 - p) + max(0.0, entry.regret or 0.0)

    def add(self, entry: PoolEntry) -> PoolEntry | None:
        """Admit ``entry``; ``None`` when its id or source is already in the pool."""
        if entry.env_id in self._entries or entry.digest in self._digests:
            return None
        if len(self._entries) >= self.capacity:
            victim = min(
                self._entries.values(), key=lambda e: (self.weight(e), e.cycle_added, e.env_id)
            )
            self._remove(victim.env_id)
        self._entries[entry.env_id] = entry
        self._digests[entry.digest] = entry.env_id
        return entry

    def _remove(self, env_id: str) -> PoolEntry:
        entry = self._entries.pop(env_id)
        self._digests.pop(entry.digest, None)
        return entry

    def record(
        self,
        env_id: str,
        hinted: Sequence[float],
        unhinted: Sequence[float],
        cycle: int,
        win_threshold: float = WIN_THRESHOLD,
    ) -> None:
        """Add the returns of episodes played in ``env_id`` this cycle (unknown ids ignored:
        procedural environments are played without entering the pool)."""
        entry = self._entries.get(env_id)
        if entry is None:
            return
        entry.plays += len(unhinted)
        entry.hinted_plays += len(hinted)
        entry.wins_nohint += sum(r >= win_threshold for r in unhinted)
        entry.wins_hint += sum(r >= win_threshold for r in hinted)
        entry.return_sum_nohint += float(sum(unhinted))
        entry.return_sum_hint += float(sum(hinted))
        entry.last_cycle = cycle

    def retire_saturated(self) -> list[PoolEntry]:
        """Remove and return entries the agent now solves without the hint."""
        done = [
            e
            for e in self._entries.values()
            if e.plays >= self.min_plays and (e.win_rate_nohint or 0.0) >= self.retire_win_rate
        ]
        for e in done:
            self._remove(e.env_id)
            self.retired.append(e.env_id)
        return done

    def sample(self, n: int, rng: random.Random) -> list[PoolEntry]:
        """Up to ``n`` distinct entries drawn by weight without replacement (deterministic for a
        given ``rng`` state)."""
        entries = sorted(self._entries.values(), key=lambda e: e.env_id)
        if n <= 0 or not entries:
            return []
        keyed = [(rng.random() ** (1.0 / self.weight(e)), e.env_id, e) for e in entries]
        keyed.sort(key=lambda t: (-t[0], t[1]))
        return [e for _, _, e in keyed[:n]]

    def skill_counts(self) -> dict[str, int]:
        return dict(Counter(e.skill for e in self._entries.values()))

    def state_dict(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "retire_win_rate": self.retire_win_rate,
            "min_plays": self.min_plays,
            "sampling": self.sampling,
            "seed": self.seed,
            "entries": [asdict(e) for e in self._entries.values()],
            "retired": list(self.retired),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> EnvPool:
        pool = cls(
            capacity=state["capacity"],
            retire_win_rate=state["retire_win_rate"],
            min_plays=state["min_plays"],
            sampling=state["sampling"],
            seed=state.get("seed", 0),
        )
        for data in state["entries"]:
            entry = PoolEntry(**data)
            pool._entries[entry.env_id] = entry
            pool._digests[entry.digest] = entry.env_id
        pool.retired = list(state.get("retired", []))
        return pool
