"""The records of an episode the runner plays (:func:`spade_envs.run_episodes`): what to play
(:class:`EpisodeSpec`), each turn (:class:`TurnRecord`), the outcome (:class:`EpisodeResult`)
and why it stopped early (:class:`EpisodeError`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .core import DEFAULT_MAX_TURNS, EnvFactory

__all__ = ["EpisodeError", "EpisodeResult", "EpisodeSpec", "Message", "TurnRecord"]

Message = dict[str, str]


@dataclass
class TurnRecord:
    """One agent turn: the reply, the action taken from it, and what the environment returned."""

    reply: str
    action: str
    malformed: bool
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    #: tool-use episodes: the parse outcome (a key of spade_envs.PARSE_OUTCOMES) and the calls
    parse_outcome: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


@dataclass
class EpisodeError:
    """Why an episode stopped early. ``boundary``: environment, agent, sandbox or infrastructure."""

    boundary: str
    kind: str
    message: str


@dataclass
class EpisodeResult:
    """An episode: messages, per-turn records, return, and an error if it stopped early."""

    env_id: str
    seed: int | None
    hinted: bool
    messages: list[Message]
    turns: list[TurnRecord]
    episode_return: float
    terminated: bool
    truncated: bool
    error: EpisodeError | None = None
    wall_s: float = 0.0
    tools: list[dict[str, Any]] | None = None
    #: the environment ran past its time limit (a ``TimeoutError`` from reset or step)
    step_timeout: bool = False

    @property
    def won(self) -> bool:
        return self.error is None and self.episode_return >= 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EpisodeSpec:
    """What to play: a factory, a seed, and optionally the hint and limits."""

    factory: EnvFactory
    seed: int | None = None
    hint: str | None = None
    env_id: str = "env"
    max_turns: int = DEFAULT_MAX_TURNS
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: the environment's tool specs; None reads the ``tools`` attribute of the built environment
    tools: list[dict[str, Any]] | None = None
    #: build the environment with its own default ``max_turns`` and play
    #: ``min(its max_turns, max_turns)`` turns (upstream's ``respect_game_max_turns``)
    respect_env_max_turns: bool = False
