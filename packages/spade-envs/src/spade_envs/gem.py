"""Play GEM (``gem-llm``) environments with the SPADE chat runner and Gymnasium adapter.

    from spade_envs import EpisodeSpec, run_episode
    from spade_envs.gem import GemFactory

    factory = GemFactory("game:GuessTheNumber-v0-easy")
    result = run_episode(EpisodeSpec(factory, seed=0, max_turns=factory.default_max_turns()), agent)

``gem`` is imported lazily, on the first environment built, so this module imports without it;
without it that first call raises :class:`GemUnavailableError` (``pip install gem-llm``).

How a GEM environment is fitted to the SPADE contract (:mod:`spade_envs.core`):

* ``reset(seed)`` and ``step(action)`` pass straight through; GEM's ``reset(seed)`` seeds
  Python's global ``random`` and NumPy's global RNG (that is how GEM games draw their episodes),
  so the same seed replays the same episode, but the host's global RNG state changes, and
  ``reset(seed=None)`` is not reproducible.
* Rewards are clipped into :data:`~spade_envs.core.REWARD_BOUNDS`; the reward GEM gave is kept in
  ``info["gem_reward"]``.
* GEM reports running out of turns as ``terminated=True, truncated=True`` (with a partial
  "closeness" reward in some games). SPADE's rule is that a truncated episode returns 0, so the
  adapter reports that step as ``terminated=False, truncated=True``; ``info["gem_terminated"]``
  keeps GEM's flag.
* ``info`` is made JSON-serializable (NumPy scalars become numbers, anything else its ``str``),
  so transcripts can be written.
* GEM's own turn limit comes from its registration (the ``-easy``/``-hard`` presets differ in
  it). :meth:`GemFactory.__call__` leaves it alone unless ``override_max_turns=True``; use
  :meth:`GemFactory.default_max_turns` for the runner's ``max_turns``.
* GEM environments carry no feasibility witness: ``solution()`` raises ``NotImplementedError``,
  so :func:`spade_envs.check_env` (which plays the solution) does not apply to them.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from .core import DEFAULT_MAX_TURNS, REWARD_BOUNDS, StepResult
from .errors import GemUnavailableError, SourceError

__all__ = ["GemUnavailableError", "GemEnvironment", "GemFactory", "import_gem", "gem_env_ids"]


def import_gem() -> Any:
    """The ``gem`` module, imported without letting it reconfigure the host's logging.

    ``import gem`` calls ``logging.basicConfig(level=INFO)``, which would give an application
    without logging set up a root handler at INFO; that is undone here.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import gem
    except ImportError as exc:
        raise GemUnavailableError(
            f"GEM environments need the gem-llm package: pip install gem-llm ({exc})"
        ) from None
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return gem


def gem_env_ids(prefix: str = "") -> list[str]:
    """Registered GEM environment ids starting with ``prefix`` (e.g. ``"game:"``), sorted."""
    import_gem()
    from gem.envs.registration import ENV_REGISTRY

    return sorted(i for i in ENV_REGISTRY if i.startswith(prefix))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    item = getattr(value, "item", None)  # NumPy scalars
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)


class GemEnvironment:
    """One GEM environment behind the SPADE contract (see the module docstring for the rules)."""

    def __init__(self, env: Any, env_id: str = "gem"):
        self.env = env
        self.env_id = env_id
        self.max_turns = getattr(env, "max_turns", None)

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        observation, info = self.env.reset(seed=seed)
        if not isinstance(observation, str):
            raise TypeError(
                f"{self.env_id}: GEM reset returned a {type(observation).__name__} observation; "
                "only text environments can be played"
            )
        return observation, _jsonable(dict(info or {}))

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if not isinstance(observation, str):
            raise TypeError(
                f"{self.env_id}: GEM step returned a {type(observation).__name__} observation"
            )
        gem_reward = float(reward)
        if not math.isfinite(gem_reward):
            raise ValueError(f"{self.env_id}: GEM step returned a non-finite reward {gem_reward}")
        low, high = REWARD_BOUNDS
        info = {
            **_jsonable(dict(info or {})),
            "gem_reward": gem_reward,
            "gem_terminated": bool(terminated),
        }
        if truncated:
            terminated = False
        return observation, min(max(gem_reward, low), high), bool(terminated), bool(truncated), info

    def solution(self) -> str:
        raise NotImplementedError(
            f"{self.env_id}: GEM environments have no solution() witness; check_env's solution checks do not apply"
        )

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


class GemFactory:
    """An :class:`~spade_envs.core.EnvFactory` for the registered GEM environment ``env_id``.

    ``make_kwargs`` go to ``gem.make``. With ``override_max_turns=True`` the runner's
    ``max_turns`` is passed to GEM too (changing the preset's difficulty); by default GEM keeps
    its own limit and the SPADE runner truncates at its ``max_turns`` independently.
    """

    def __init__(self, env_id: str, *, override_max_turns: bool = False, **make_kwargs: Any):
        self.env_id = env_id
        self.override_max_turns = override_max_turns
        self.make_kwargs = make_kwargs

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> GemEnvironment:
        gem = import_gem()
        options = {**self.make_kwargs, **kwargs}
        if self.override_max_turns:
            options["max_turns"] = max_turns
        from gem.envs.registration import ENV_REGISTRY

        if self.env_id not in ENV_REGISTRY:
            raise SourceError(
                f"no GEM environment {self.env_id!r}; spade_envs.gem.gem_env_ids() lists them"
            )
        return GemEnvironment(gem.make(self.env_id, **options), self.env_id)

    def default_max_turns(self) -> int:
        """GEM's own turn limit for this environment (``DEFAULT_MAX_TURNS`` if it has none)."""
        env = self()
        try:
            limit = env.max_turns
        finally:
            env.close()
        return int(limit) if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TURNS
