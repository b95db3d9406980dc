"""Delayed designer rewards: score a designer item from the plays of a whole window.

A designer completion made at cycle ``c`` is trained at cycle ``c + delay``. Its reward is not
fixed when it is made: it is recomputed at release from every unhinted play of its environment
at cycles ``c .. c + delay - 1`` (offsets ``0 .. delay - 1``; offset 0 alone when
``delay == 0``), with the hint plays of cycle ``c``. The last cycle flushes what is still
pending, scored on every play recorded so far. This is how the released code trains the
designer with ``--spade-proposer-training-delay``.

The loop, once per cycle, after playing and before building the batch::

    queue.push(cycle, outcomes, payloads)        # this cycle's designer items
    queue.record_plays(cycle, {env_id: unhinted returns of this cycle})
    released = queue.flush(cfg.reward, state, n) if last else queue.pop_ready(cycle, cfg.reward, state, n)
    for payload, reward in zip(released.payloads, released.rewards): ...  # None = masked

``payloads`` are whatever the loop needs to train the item later (its token samples, its
advantage group); they must be JSON-able, as the whole queue is (``state_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from spade_train.core.rewards import (
    DesignerScores,
    EnvOutcome,
    RewardSettings,
    RewardState,
    score_designers,
)


@dataclass
class Released:
    """Items released this cycle: their payloads, rewards (``None`` = masked), the scores."""

    payloads: list[Any] = field(default_factory=list)
    rewards: list[float | None] = field(default_factory=list)
    outcomes: list[EnvOutcome] = field(default_factory=list)
    scores: DesignerScores | None = None


def _outcome_to_json(o: EnvOutcome) -> dict[str, Any]:
    d = asdict(o)
    d["hinted_returns"] = list(o.hinted_returns)
    d["unhinted_returns"] = list(o.unhinted_returns)
    d["returns_by_offset"] = None
    return d


class DelayedDesignerRewards:
    """The queue of pending designer items and the plays of their environments."""

    def __init__(self, delay: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.delay = delay
        # each item: {"cycle": c, "outcome": {...}, "payload": ...}
        self._items: list[dict[str, Any]] = []
        # env_id -> {offset cycle (absolute): [returns]}
        self._plays: dict[str, dict[int, list[float]]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def push(self, cycle: int, outcomes: Sequence[EnvOutcome], payloads: Sequence[Any]) -> None:
        """Queue this cycle's items. Each outcome's ``unhinted_returns`` are its plays at
        offset 0; ``env_id`` links it to later plays (``None``: offset 0 only)."""
        if len(outcomes) != len(payloads):
            raise ValueError(f"{len(outcomes)} outcomes but {len(payloads)} payloads")
        for o, p in zip(outcomes, payloads, strict=True):
            self._items.append({"cycle": int(cycle), "outcome": _outcome_to_json(o), "payload": p})

    def record_plays(self, cycle: int, returns_by_env: Mapping[str, Sequence[float]]) -> None:
        """Record this cycle's unhinted returns per environment. Only environments with a
        pending item made at an earlier cycle are kept (plays at an item's own cycle are its
        offset 0, given at push)."""
        for env_id, returns in returns_by_env.items():
            if any(it["outcome"]["env_id"] == env_id and it["cycle"] < cycle for it in self._items):
                self._plays.setdefault(env_id, {}).setdefault(int(cycle), []).extend(
                    float(r) for r in returns
                )

    def _window_outcome(self, item: dict[str, Any], last_cycle: int | None) -> EnvOutcome:
        o = dict(item["outcome"])
        o["hinted_returns"] = tuple(o["hinted_returns"])
        o["unhinted_returns"] = tuple(o["unhinted_returns"])
        outcome = EnvOutcome(**o)
        window: dict[int, list[float]] = {0: list(outcome.unhinted_returns)}
        made = item["cycle"]
        for c, returns in self._plays.get(outcome.env_id or "", {}).items():
            if c > made and (last_cycle is None or c <= last_cycle):
                window.setdefault(c - made, []).extend(returns)
        return replace(outcome, returns_by_offset=window)

    def _release(
        self,
        chosen: list[dict[str, Any]],
        full: bool,
        cfg: RewardSettings,
        state: RewardState | None,
        n_agent_episodes: int | None,
    ) -> Released:
        if not chosen:
            return Released()
        span = max(0, self.delay - 1)
        outcomes = [self._window_outcome(it, None if full else it["cycle"] + span) for it in chosen]
        scores = score_designers(
            outcomes,
            cfg,
            state,
            n_agent_episodes=n_agent_episodes,
            update_trackers_first=self.delay > 0,
        )
        ids = {id(it) for it in chosen}
        self._items = [it for it in self._items if id(it) not in ids]
        pending = {it["outcome"]["env_id"] for it in self._items}
        self._plays = {e: p for e, p in self._plays.items() if e in pending}
        return Released([it["payload"] for it in chosen], scores.rewards, outcomes, scores)

    def pop_ready(
        self,
        cycle: int,
        cfg: RewardSettings,
        state: RewardState | None = None,
        n_agent_episodes: int | None = None,
    ) -> Released:
        """Score and remove the items made at cycles ``<= cycle - delay``, oldest first."""
        chosen = [it for it in self._items if it["cycle"] + self.delay <= cycle]
        chosen.sort(key=lambda it: it["cycle"])
        return self._release(chosen, False, cfg, state, n_agent_episodes)

    def flush(
        self,
        cfg: RewardSettings,
        state: RewardState | None = None,
        n_agent_episodes: int | None = None,
    ) -> Released:
        """Score and remove every pending item on all plays recorded (the last cycle)."""
        chosen = sorted(self._items, key=lambda it: it["cycle"])
        return self._release(chosen, True, cfg, state, n_agent_episodes)

    def state_dict(self) -> dict[str, Any]:
        return {
            "delay": self.delay,
            "items": self._items,
            "plays": {e: [[c, r] for c, r in p.items()] for e, p in self._plays.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.delay = int(state["delay"])
        self._items = [dict(it) for it in state["items"]]
        self._plays = {
            e: {int(c): [float(x) for x in r] for c, r in p} for e, p in state["plays"].items()
        }


class DelayedRewards:
    """A plain queue that releases items pushed at cycle ``c`` at cycle ``c + delay``, their
    rewards fixed at push time (the previous loop's queue; :class:`DelayedDesignerRewards`
    recomputes them as upstream does)."""

    def __init__(self, delay: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.delay = delay
        self._queue: list[tuple[int, list[dict[str, Any]]]] = []

    def push(self, cycle: int, items: Sequence[dict[str, Any]]) -> None:
        self._queue.append((int(cycle), list(items)))

    def pop_ready(self, cycle: int) -> list[dict[str, Any]]:
        """All items pushed at cycles ``<= cycle - delay``, oldest first, removed."""
        ready: list[tuple[int, list[dict[str, Any]]]] = []
        waiting: list[tuple[int, list[dict[str, Any]]]] = []
        for pushed, items in self._queue:
            (ready if pushed + self.delay <= cycle else waiting).append((pushed, items))
        self._queue = waiting
        return [item for _, items in ready for item in items]

    def flush(self) -> list[dict[str, Any]]:
        """Everything still queued (the last cycle), oldest first."""
        return self.pop_ready(10**12)

    def __len__(self) -> int:
        return sum(len(items) for _, items in self._queue)

    def state_dict(self) -> dict[str, Any]:
        return {"delay": self.delay, "queue": [[c, items] for c, items in self._queue]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.delay = int(state["delay"])
        self._queue = [(int(c), list(items)) for c, items in state["queue"]]
