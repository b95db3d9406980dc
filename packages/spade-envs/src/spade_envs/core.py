"""The SPADE environment contract.

An environment is a Python module (standard library only) that defines exactly one class whose
name ends in ``Env``. The class needs no base class; it is duck-typed against
:class:`TextEnvironment`. This is the format of the released SPADE corpus and the format the
designer model is asked to write (:func:`contract_text` returns the prompt text).

Episode rules
-------------
* ``__init__(self, max_turns=10, **kwargs)`` must accept and ignore unknown keyword arguments.
* ``reset(seed=None) -> (observation, info)`` starts a fresh episode. All randomness comes from a
  ``random.Random(seed)`` the environment owns, so the same seed replays the same episode.
* ``step(action) -> (observation, reward, terminated, truncated, info)``. ``terminated`` means the
  task ended (won or lost); ``truncated`` means the turn limit ran out first. Every reward is a
  finite float inside :data:`REWARD_BOUNDS`.
* ``solution() -> str`` is the feasibility witness for the current episode: the winning actions,
  one per line, which played in order from ``reset(seed)`` win within ``max_turns``.
* ``close()`` releases resources.
* ``info`` dicts are JSON-serializable.

Reward contract (checked by :mod:`spade_envs.reward_contract` and the checker): a step after
the episode ended returns reward 0.0; the rewards of one episode sum inside
:data:`REWARD_BOUNDS`; a lost episode earns less than a won one; a malformed reply never earns
a positive reward above a wrong answer's.

The episode return (:func:`episode_return`) is the final reward clipped to [0, 1] when the
episode terminated, and 0 when it was truncated: running out of turns is never a win.
A cognitive-game answer is written ``\\boxed{...}``; the privileged hint, when the agent gets it,
is appended to the first observation as ``"{observation}\\n\\nHINT: {hint}"``.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "SKILLS",
    "TOOL_USE",
    "REWARD_BOUNDS",
    "RETURN_BOUNDS",
    "DEFAULT_MAX_TURNS",
    "StepResult",
    "TextEnvironment",
    "EnvFactory",
    "episode_return",
    "with_hint",
    "contract_text",
    "ALLOWED_IMPORTS",
    "MAX_OBSERVATION_CHARS",
]

#: The six cognitive skills of the games setting.
SKILLS: tuple[str, ...] = ("Math", "Logic", "Spatial", "Pattern", "Optimization", "Causal")
#: The skill label of the tool-use setting.
TOOL_USE = "ToolUse"
#: Every per-step reward must lie in this closed interval.
REWARD_BOUNDS: tuple[float, float] = (-1.0, 1.0)
#: Episode returns lie in this closed interval; 1.0 is a win.
RETURN_BOUNDS: tuple[float, float] = (0.0, 1.0)
DEFAULT_MAX_TURNS = 10

#: ``(observation, reward, terminated, truncated, info)``
StepResult = tuple[str, float, bool, bool, dict]


@runtime_checkable
class TextEnvironment(Protocol):
    """What an environment object offers. See the module docstring for the rules."""

    def reset(self, seed: int | None = None) -> tuple[str, dict]: ...

    def step(self, action: str) -> StepResult: ...

    def solution(self) -> str: ...

    def close(self) -> None: ...


class EnvFactory(Protocol):
    """Builds a fresh environment: ``factory(max_turns=10, **kwargs)``."""

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> TextEnvironment: ...


def episode_return(
    final_reward: float, terminated: bool, bounds: tuple[float, float] = RETURN_BOUNDS
) -> float:
    """The return of an episode: final reward clipped to ``bounds`` if it terminated, 0.0 if
    truncated. (The released training code clips to ``REWARD_BOUNDS``, ``[-1, 1]``.)"""
    if not terminated or not math.isfinite(final_reward):
        return 0.0
    low, high = bounds
    return min(max(float(final_reward), low), high)


def with_hint(observation: str, hint: str | None) -> str:
    """The first observation as the agent sees it with the privileged hint."""
    if not hint:
        return observation
    return f"{observation}\n\nHINT: {hint}"


_CONTRACT = """\
Write one complete, self-contained Python module that implements a text environment (a game the
player solves over several turns). Rules:

1. Standard library only. Allowed imports: {imports}. No file, network or process access, no
   printing, no code that runs at import time besides definitions and constants.
2. Define exactly one class whose name ends in `Env` (no base class). Give it a class attribute
   `skill = "<one of {skills}>"`.
3. `__init__(self, max_turns: int = 10, **kwargs)`: store `max_turns`; accept and ignore other
   keyword arguments.
4. `reset(self, seed: int | None = None) -> tuple[str, dict]`: start a new episode using only
   `self.rng = random.Random(seed)` for randomness (never the global `random` functions), and
   return `(observation, info)`. The first observation states the whole task, the rules, the
   turn limit, and that answers are written as \\boxed{{...}}. `info` is a JSON-serializable dict.
5. `step(self, action: str) -> tuple[str, float, bool, bool, dict]` returns `(observation,
   reward, terminated, truncated, info)`. Read the player's answer from the LAST \\boxed{{...}} in
   `action`. Reward 1.0 when the player wins (terminated=True), 0.0 when they lose
   (terminated=True); non-final steps give 0.0 or a small penalty. Every reward is a finite float
   in [{rmin}, {rmax}]. A malformed action gets an observation explaining the format and counts
   as a turn; it never raises. When the turn count reaches `max_turns` without a result, return
   truncated=True. Stepping after the episode ended returns reward 0.0 and terminated=True.
6. `solution(self) -> str`: after `reset(seed)`, return the winning actions for this episode, one
   per line (for example `\\boxed{{42}}`). Played in order they must win within `max_turns`.
7. `close(self) -> None`.
8. The same seed must give the same episode; different seeds should give different episodes.
   Keep every observation under {max_obs} characters.
9. The episode must be solvable by careful reasoning but not by guessing.

Also write a privileged HINT: one or two sentences that help a player solve ANY episode of this
environment (a strategy or key insight). The hint must not contain the answer of a particular
episode. The hint is appended to the first observation as "HINT: <hint>".
"""

#: The standard-library modules an environment may import: this list is the contract, the
#: designer prompt shows it, and spade-sandbox enforces it (its ``DEFAULT_ALLOWED_IMPORTS`` is a
#: copy, because spade-sandbox depends on no spade package; a spade-envs test asserts the two are
#: equal). Nothing here reaches the file system, the network or other processes.
ALLOWED_IMPORTS: tuple[str, ...] = (
    "__future__", "abc", "array", "bisect", "calendar", "cmath", "collections", "colorsys",
    "contextlib", "copy", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions",
    "functools", "graphlib", "hashlib", "heapq", "itertools", "json", "math", "numbers",
    "operator", "pprint", "random", "re", "statistics", "string", "textwrap", "time", "typing",
    "unicodedata",
)  # fmt: skip

#: The longest observation (in characters) an environment may return, hint excluded: the
#: designer prompt states it and ``check_env`` enforces it.
MAX_OBSERVATION_CHARS = 4000


def contract_text(max_observation_chars: int = MAX_OBSERVATION_CHARS) -> str:
    """The environment contract as prompt text for the designer model."""
    return _CONTRACT.format(
        imports=", ".join(ALLOWED_IMPORTS),
        skills=", ".join(SKILLS),
        rmin=REWARD_BOUNDS[0],
        rmax=REWARD_BOUNDS[1],
        max_obs=max_observation_chars,
    )
