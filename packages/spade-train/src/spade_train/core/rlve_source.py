"""The fixed-environment RLVE baseline: RLVE's environments with the sliding-window difficulty.

:class:`SlidingWindow` is the released SPADE code's RLVE-style difficulty controller: per
environment a window ``[low, high]`` (both start at 0); only plays at ``high`` count; once
``tau_num`` of them are in, the counters reset and, if the success rate reached ``tau_acc``
(and ``high < max_difficulty``), ``high`` rises by one and ``low`` follows so the window is at
most ``d_delta`` wide. A play succeeds when its reward is above 0. Difficulties are drawn
uniformly from the window; the window never moves down.

:class:`RlveSource` proposes each cycle's environments as upstream's fixed-environment loop
does with a regeneration interval of 1: all environments when there are at most
``envs_per_cycle``, else a uniform sample of that many; per environment a difficulty from its
window and (``same_problem``) one generated problem shared by all of its episodes, so an
environment's episodes form one GRPO group. Every episode's reward updates the controller, in
play order.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

import spade_envs as se

from spade_train.config_sections import RlveConfig
from spade_train.core.pool import PoolEntry


@dataclass
class Window:
    """One environment's difficulty window and its counters at ``high``."""

    low: int = 0
    high: int = 0
    successes: int = 0
    attempts: int = 0


class SlidingWindow:
    """RLVE's sliding-window difficulty rule (see the module docstring)."""

    def __init__(
        self, tau_acc: float = 0.9, tau_num: int = 128, d_delta: int = 4, max_difficulty: int = 20
    ) -> None:
        if not 0.0 <= tau_acc <= 1.0 or tau_num < 1 or d_delta < 1 or max_difficulty < 0:
            raise ValueError("need 0 <= tau_acc <= 1, tau_num >= 1, d_delta >= 1, max >= 0")
        self.tau_acc, self.tau_num, self.d_delta = tau_acc, tau_num, d_delta
        self.max_difficulty = max_difficulty
        self.windows: dict[str, Window] = {}

    def window(self, env: str) -> Window:
        return self.windows.setdefault(env, Window())

    def sample(self, env: str, rng: random.Random) -> int:
        w = self.window(env)
        return rng.randint(w.low, w.high)

    def update(self, env: str, difficulty: int, reward: float) -> None:
        w = self.window(env)
        if difficulty != w.high:
            return
        w.attempts += 1
        w.successes += reward > 0
        if w.attempts < self.tau_num:
            return
        if w.successes / w.attempts >= self.tau_acc and w.high < self.max_difficulty:
            w.high += 1
            w.low = max(w.low, w.high - self.d_delta + 1)
        w.successes = w.attempts = 0

    def metrics(self) -> dict[str, float]:
        if not self.windows:
            return {}
        highs = [w.high for w in self.windows.values()]
        lows = [w.low for w in self.windows.values()]
        return {
            "difficulty/avg_high": sum(highs) / len(highs),
            "difficulty/avg_low": sum(lows) / len(lows),
            "difficulty/max_high": float(max(highs)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {k: asdict(w) for k, w in self.windows.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.windows = {k: Window(**w) for k, w in state.items()}


@dataclass(frozen=True)
class _Planned:
    name: str
    difficulty: int
    parameter: dict[str, Any] | None
    problem_seed: int | None


class RlveSource:
    """Each cycle's RLVE environments and their difficulty (``cfg`` is a ``RlveConfig``)."""

    def __init__(self, cfg: RlveConfig, seed: int, max_turns: int) -> None:
        try:
            self.names = se.resolve_rlve_env_set(cfg.envs)
        except se.SpadeEnvsError as exc:
            raise ValueError(f"rlve.envs: {exc}") from None
        self.cfg, self.max_turns = cfg, max_turns
        self.controller = SlidingWindow(cfg.tau_acc, cfg.tau_num, cfg.d_delta, cfg.max_difficulty)
        self.rng = random.Random(seed)
        self._planned: dict[str, _Planned] = {}
        self.create_failed = 0
        """Environments skipped in the last proposal: RLVE's generator failed ten times (upstream
        skips them too)."""

    def propose(self, cycle: int, n: int) -> list[PoolEntry]:
        """This cycle's environments as pool entries (played, never admitted to the pool)."""
        names = list(self.names) if len(self.names) <= n else self.rng.sample(self.names, n)
        self._planned = {}
        self.create_failed = 0
        entries = []
        for i, name in enumerate(names):
            d = self.controller.sample(name, self.rng)
            parameter, problem_seed = None, None
            if self.cfg.same_problem:
                try:
                    parameter, problem_seed = se.rlve_same_problem(name, d, self.rng)
                except se.SourceError:
                    self.create_failed += 1
                    continue
            env_id = f"c{cycle:04d}_rlve{i}_{name}_d{d}"
            self._planned[env_id] = _Planned(name, d, parameter, problem_seed)
            entries.append(
                PoolEntry(
                    env_id=env_id,
                    source=f"# RLVE {name}, difficulty {d}, problem seed {problem_seed}\n",
                    class_name="RlveEnvironment",
                    hint=None,
                    skill="RLVE",
                    max_turns=min(self.max_turns, self.cfg.attempts),
                    cycle_added=cycle,
                    origin=name,
                )
            )
        return entries

    def factory(self, entry: PoolEntry) -> se.RlveFactory:
        """The environment factory of a proposed entry."""
        p = self._planned[entry.env_id]
        return se.RlveFactory(
            p.name,
            p.difficulty,
            parameter=p.parameter,
            problem_seed=p.problem_seed,
            parameter_seed=self.rng.randint(0, 2**31 - 1),
            attempts=self.cfg.attempts,
            reward=self.cfg.reward,
        )

    def observe(self, entry: PoolEntry, returns: list[float]) -> None:
        """Feed an entry's episode rewards, in play order, to the controller."""
        p = self._planned.get(entry.env_id)
        if p is not None:
            for r in returns:
                self.controller.update(p.name, p.difficulty, r)

    def metrics(self) -> dict[str, float]:
        return {**self.controller.metrics(), "rlve/create_failed": float(self.create_failed)}

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"windows": self.controller.state_dict(), "rng": [version, list(internal), gauss]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.controller.load_state_dict(state["windows"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
