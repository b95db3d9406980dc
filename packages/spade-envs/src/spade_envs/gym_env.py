"""Gymnasium adapter: every SPADE environment as a real ``gymnasium.Env`` with Text spaces.

Gymnasium's default ``Text`` charset holds only letters and digits; :data:`TEXT_CHARSET` admits
whitespace, punctuation and the Basic Multilingual Plane, and observations outside it (astral
characters such as emoji) are rejected with a ContractError rather than silently altered.
For ``gymnasium.vector.AsyncVectorEnv`` pass ``shared_memory=False``: Text spaces cannot live in
shared memory and come back zeroed otherwise. The spaces print short (``Text(0, 8192,
charset=TEXT_CHARSET)``), not their 63,000 characters.

Lifecycle: :meth:`SpadeGymEnv.close` closes the wrapped environment and, by default, the factory
it came from (a sandboxed factory's idle workers), and the same happens when the object is
garbage collected or at interpreter exit (``weakref.finalize``), so no worker process, file
descriptor or work directory outlives the environment.
"""

from __future__ import annotations

import weakref
from typing import Any

import gymnasium
from gymnasium import spaces

from .checker import check_step_result, solution_actions
from .core import DEFAULT_MAX_TURNS, MAX_OBSERVATION_CHARS, EnvFactory, episode_return, with_hint
from .errors import ContractError

__all__ = ["TEXT_CHARSET", "MAX_ACTION_CHARS", "SpadeGymEnv", "text_space"]

MAX_ACTION_CHARS = 8_192


def _charset() -> frozenset[str]:
    chars = {"\t", "\n", "\r"}
    chars.update(chr(c) for c in range(0x20, 0x7F))
    chars.update(chr(c) for c in range(0xA0, 0xD800))
    chars.update(chr(c) for c in range(0xE000, 0xFFFE))
    return frozenset(chars)


#: Characters admitted by SPADE's Text spaces.
TEXT_CHARSET: frozenset[str] = _charset()


class _Text(spaces.Text):
    """A Text space over :data:`TEXT_CHARSET` whose repr names the charset instead of listing it."""

    def __repr__(self) -> str:
        return f"Text({self.min_length}, {self.max_length}, charset=TEXT_CHARSET)"


def text_space(max_length: int) -> spaces.Text:
    """A Text space of up to ``max_length`` characters from :data:`TEXT_CHARSET` (empty allowed)."""
    return _Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


def _owned_factory(factory: EnvFactory) -> Any:
    """``factory`` when closing it means something (an object with ``close()``, such as a
    sandboxed factory holding idle workers); None for a class, whose ``close`` is the
    environment's own method."""
    if isinstance(factory, type) or not callable(getattr(factory, "close", None)):
        return None
    return factory


def _close(env: Any, factory: Any) -> None:
    """Close ``env``, then ``factory`` (None: not ours); the factory is closed even when the
    environment's ``close`` raised."""
    try:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    finally:
        if factory is not None:
            factory.close()


class SpadeGymEnv(gymnasium.Env[str, str]):
    """A SPADE environment behind Gymnasium's API.

    ``factory`` builds the wrapped environment (from :func:`spade_envs.load_env` or a corpus);
    ``hint``, when given, is appended to the first observation. ``reset(seed=None)`` draws the
    episode seed from the Gymnasium RNG, so ``reset(seed=s)`` followed by seedless resets is
    reproducible as Gymnasium expects. ``info`` carries ``episode_return`` once the episode ends
    and, after reset, ``seed``.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        factory: EnvFactory,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        hint: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = None,
        env_id: str = "spade-env",
        close_factory: bool = True,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'ansi' or None")
        self.env_id = env_id
        self.max_turns = max_turns
        self.hint = hint
        self.render_mode = render_mode
        self.observation_space = text_space(MAX_OBSERVATION_CHARS + (len(hint) + 8 if hint else 0))
        self.action_space = text_space(MAX_ACTION_CHARS)
        self._env = factory(max_turns=max_turns, **(env_kwargs or {}))
        # The finalizer holds the environment and the factory, never self: it runs on close(),
        # when this object is collected, or at interpreter exit, whichever comes first.
        owned = _owned_factory(factory) if close_factory else None
        self._finalizer = weakref.finalize(self, _close, self._env, owned)
        self._observation = ""
        self._turn = 0
        self._done = False

    def _checked(self, observation: str) -> str:
        if not self.observation_space.contains(observation):
            bad = sorted({c for c in observation if c not in TEXT_CHARSET})[:5]
            raise ContractError(
                "observation_charset",
                f"{self.env_id}: observation has characters outside TEXT_CHARSET {bad!r} or is too long; "
                "use plain text within the Basic Multilingual Plane",
            )
        return observation

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict]:
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        observation, info = self._env.reset(seed=episode_seed)
        if not (isinstance(observation, str) and isinstance(info, dict)):
            raise ContractError(
                "reset_return_type", f"{self.env_id}: reset must return (str, dict)"
            )
        self._observation = self._checked(with_hint(observation, self.hint))
        self._turn = 0
        self._done = False
        return self._observation, {**info, "seed": episode_seed}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            raise gymnasium.error.ResetNeeded(
                f"{self.env_id}: the episode ended; call reset() first"
            )
        result = self._env.step(action)
        check_step_result(result, f"{self.env_id}: step")
        observation, reward, terminated, truncated, info = result
        self._turn += 1
        if not terminated and self._turn >= self.max_turns:
            truncated = True
        self._observation = self._checked(observation)
        self._done = terminated or truncated
        if self._done:
            info = {**info, "episode_return": episode_return(reward, terminated)}
        return self._observation, float(reward), terminated, truncated, info

    def solution(self) -> list[str]:
        """The winning actions of the current episode (the environment's feasibility witness)."""
        return solution_actions(self._env.solution())

    def render(self) -> str | None:
        return self._observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the environment (and the factory it owns); calling it again does nothing."""
        self._finalizer()
        super().close()
