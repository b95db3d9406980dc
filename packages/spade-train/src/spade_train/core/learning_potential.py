"""Moving-average trackers the designer rewards and the agent baseline read.

- :class:`LearningPotential`: a fast and a slow exponential average of one reward stream
  (one per skill). Its *baseline* is the slow average; its *potential* is the scaled gap
  ``|mu_fast - mu_slow| / (2 * (gamma_fast - gamma_slow))``. ``gamma`` is the weight of the
  newest value (``mu <- (1 - gamma) * mu + gamma * r``), so the fast one has the larger gamma.
  The first update sets both averages to the value.
- :class:`EMA` and :class:`GameBaselines`: one exponential average per game, ``decay`` being
  the weight of the old value (``v <- decay * v + (1 - decay) * x``); used by the
  ``ema-baseline`` agent advantage.

Every tracker round-trips through a JSON-able ``state_dict`` so a run resumes exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LearningPotential:
    """Fast and slow exponential averages of a reward stream (see the module docstring)."""

    gamma_fast: float = 0.99
    gamma_slow: float = 0.95
    mu_fast: float | None = None
    mu_slow: float | None = None
    updates: int = 0

    def __post_init__(self) -> None:
        if not self.gamma_fast > self.gamma_slow:
            raise ValueError(
                f"gamma_fast ({self.gamma_fast}) must be greater than gamma_slow "
                f"({self.gamma_slow})"
            )

    @property
    def scale(self) -> float:
        return 1.0 / (2.0 * (self.gamma_fast - self.gamma_slow))

    def update(self, value: float) -> float:
        """Fold in one value; returns the potential after it (0 on the first update)."""
        value = float(value)
        self.updates += 1
        if self.mu_fast is None or self.mu_slow is None:
            self.mu_fast = self.mu_slow = value
            return 0.0
        self.mu_fast = (1 - self.gamma_fast) * self.mu_fast + self.gamma_fast * value
        self.mu_slow = (1 - self.gamma_slow) * self.mu_slow + self.gamma_slow * value
        return self.potential()

    def signed_potential(self) -> float:
        if self.mu_fast is None or self.mu_slow is None:
            return 0.0
        return (self.mu_fast - self.mu_slow) * self.scale

    def potential(self) -> float:
        return abs(self.signed_potential())

    def baseline(self) -> float:
        """The slow average (0 before the first update)."""
        return self.mu_slow if self.mu_slow is not None else 0.0

    def state_dict(self) -> dict[str, Any]:
        return {
            "gamma_fast": self.gamma_fast,
            "gamma_slow": self.gamma_slow,
            "mu_fast": self.mu_fast,
            "mu_slow": self.mu_slow,
            "updates": self.updates,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LearningPotential:
        return cls(
            float(state["gamma_fast"]),
            float(state["gamma_slow"]),
            state.get("mu_fast"),
            state.get("mu_slow"),
            int(state.get("updates", 0)),
        )


@dataclass
class EMA:
    """Exponential average; ``decay`` weighs the old value. The first value is taken as is."""

    decay: float = 0.5
    value: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.decay < 1.0:
            raise ValueError(f"decay must lie strictly between 0 and 1, got {self.decay}")

    def update(self, x: float) -> float:
        x = float(x)
        self.value = x if self.value is None else self.decay * self.value + (1 - self.decay) * x
        return self.value

    def get(self) -> float:
        return self.value if self.value is not None else 0.0


@dataclass
class GameBaselines:
    """One :class:`EMA` of the mean return per game (the ``ema-baseline`` advantage)."""

    decay: float = 0.5
    values: dict[str, EMA] = field(default_factory=dict)

    def get(self, game: str) -> float:
        ema = self.values.get(game)
        return ema.get() if ema is not None else 0.0

    def update(self, game: str, mean_return: float) -> float:
        return self.values.setdefault(game, EMA(self.decay)).update(mean_return)

    def stats(self) -> dict[str, float]:
        if not self.values:
            return {}
        vals = [e.get() for e in self.values.values()]
        return {
            "games": float(len(vals)),
            "mean": sum(vals) / len(vals),
            "min": min(vals),
            "max": max(vals),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "values": {g: e.value for g, e in self.values.items()}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> GameBaselines:
        decay = float(state["decay"])
        values = {
            g: EMA(decay, None if v is None else float(v)) for g, v in state["values"].items()
        }
        return cls(decay, values)
