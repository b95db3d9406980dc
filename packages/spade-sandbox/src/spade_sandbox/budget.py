"""What an episode of a `SandboxedEnv` has used of its limits: steps taken and wall seconds
spent in its own calls (from the reset that began it; the time between calls, the agent's,
does not count)."""

from __future__ import annotations

import time

from .errors import LimitExceeded
from .limits import Limits


class EpisodeBudget:
    """One episode's use of `Limits.max_steps` and `Limits.episode_wall_s`.

    ``started`` is when the episode's reset (or restore) returned, None when no episode is
    under way; ``used`` the wall seconds its calls took, the reset's own included; ``steps``
    the steps counted so far."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.started: float | None = None
        self.used = 0.0
        self.steps = 0

    def begin(self, call_started: float) -> None:
        """An episode starts now, from a reset (or restore) call sent at ``call_started``."""
        self.started = time.monotonic()
        self.used = self.started - call_started  # the reset's own time counts
        self.steps = 0

    def clear(self) -> None:
        """No episode under way (a renewed environment)."""
        self.started = None
        self.used = 0.0
        self.steps = 0

    def take_step(self) -> float:
        """Count one step and return its timeout: `Limits.call_wall_s`, or what the episode
        has left when that is less. `ValueError` before a reset; `LimitExceeded` once the
        episode has taken `Limits.max_steps` steps or spent `Limits.episode_wall_s`."""
        if self.started is None:
            raise ValueError("call reset() before step()")
        limits = self.limits
        if self.steps >= limits.max_steps:
            raise LimitExceeded(
                f"the episode reached Limits.max_steps={limits.max_steps}; call reset()"
            )
        left = limits.episode_wall_s - self.used
        if left <= 0:
            raise LimitExceeded(
                f"the episode ran past Limits.episode_wall_s={limits.episode_wall_s:g}; call reset()"
            )
        self.steps += 1
        return min(limits.call_wall_s, left)

    def spend(self, seconds: float) -> None:
        """A step's call (or half of it) took ``seconds``."""
        self.used += seconds
