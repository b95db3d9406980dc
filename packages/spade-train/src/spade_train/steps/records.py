"""The typed data that flows between the six steps of a cycle.

design → :class:`Design` (one designer completion, its parse, its validation report)
play → :class:`PlayedEnv` (one environment's returns) and :class:`Episode` (one played episode
with its agent-role samples)
score → :class:`Scored` (a reward-carrying unit: one episode or one designer completion)
advantage → :class:`Batch` (the joint training batch, advantages set, with per-role stats)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import spade_corpus as sc
import spade_envs as se

from spade_train.core.pool import PoolEntry
from spade_train.types import Generation, Message, Role, TrainSample


@dataclass
class Design:
    """One designer completion and what became of it."""

    prompt_index: int
    completion_index: int
    skill: str
    text: str
    generation: Generation
    env_id: str | None = None
    source: str | None = None
    class_name: str | None = None
    hint: str | None = None
    parse_error: str | None = None
    parse_message: str | None = None
    report: sc.ValidationReport | None = None
    prompt: list[Message] = field(default_factory=list)
    """The conversation this completion answers (retries and repairs reuse it)."""
    rejected: str | None = None
    """A pipeline stage's reason code (``spade_train.reasons.PIPELINE_REASONS``) after the sandbox
    passed it; ``rejected_message`` says why."""
    rejected_message: str | None = None
    pipeline: dict[str, Any] = field(default_factory=dict)
    """What the pipeline stages recorded: earlier attempts, repair turns, the validator's and
    the self-judge's verdicts, whether the time budget ran out."""
    repaired_turn: int | None = None
    """The repair turn whose environment was kept (the trained reply is still the first)."""
    judged_invalid: bool = False
    """The self-judge answered no (the designer's reward takes its penalty)."""
    copy_of: str | None = None
    """A valid design that is an exact or near duplicate of a scaffold example or a shipped
    corpus game: that game's id (``steps.design.mark_copies``). It still enters the pool."""

    @property
    def valid(self) -> bool:
        return self.rejected is None and self.report is not None and self.report.valid

    @property
    def reason(self) -> str | None:
        if self.parse_error:
            return self.parse_error
        if self.rejected:
            return self.rejected
        return None if self.report is None else self.report.reason

    @property
    def parsed(self) -> bool:
        """The reply gave a source (and a hint) that validation can judge."""
        return self.parse_error is None and self.source is not None

    def mark_duplicate(self) -> None:
        """A valid environment whose source or id the pool already holds."""
        assert self.report is not None
        self.report = dataclasses.replace(self.report, valid=False, reason="duplicate")

    def to_row(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt_index,
            "completion": self.completion_index,
            "skill": self.skill,
            "env_id": self.env_id,
            "valid": self.valid,
            "reason": self.reason,
            "parse_message": self.parse_message,
            "hint": self.hint,
            "text": self.text,
            "report": None if self.report is None else self.report.to_dict(),
            "completion_tokens": len(self.generation.completion_ids),
            "rejected_message": self.rejected_message,
            "copy_of": self.copy_of,
            "repaired_turn": self.repaired_turn,
            "pipeline": self.pipeline,
        }


@dataclass
class Episode:
    """One played episode: which environment (index into the cycle's list), with or without
    the hint, its result, and the agent-role samples of its turns (advantage not yet set)."""

    env_index: int
    hinted: bool
    result: se.EpisodeResult
    samples: list[TrainSample]
    trained: bool = True
    """False for hint plays that only feed the designer's regret (the default)."""


@dataclass
class PlayedEnv:
    """One environment played this cycle: the returns with and without the hint."""

    entry: PoolEntry
    hinted: list[float] = field(default_factory=list)
    unhinted: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    step_timeout: bool = False
    """A ``step`` timed out while the agent played it (a designer penalty upstream)."""


@dataclass
class Scored:
    """A unit of the joint batch: the samples of one episode (agent) or one designer
    completion (designer), its reward, and the group its advantage is relative to."""

    role: Role
    group: tuple[Any, ...]
    reward: float
    samples: list[TrainSample]

    def to_json(self) -> dict[str, Any]:
        """JSON data (delayed designer items are checkpointed)."""
        return {
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "reward": self.reward,
            "group": list(self.group),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], role: Role = "designer") -> Scored:
        return cls(
            role,
            tuple(data["group"]),
            float(data["reward"]),
            [TrainSample(**s) for s in data["samples"]],
        )


@dataclass
class Scores:
    """Step 4's output: what trains this cycle, and the regrets measured."""

    agent: list[Scored]
    designer: list[Scored]
    """Designer items released this cycle (after the reward delay)."""
    designer_rewards: list[float]
    """The rewards of the designer items released (and not masked) this cycle."""
    regrets: list[float]
    metrics: dict[str, float] = field(default_factory=dict)
    """The designer scoring's own metrics (scale, masked share, skill trackers)."""


@dataclass
class Batch:
    """Step 5's output: the joint batch with advantages set, and per-role advantage stats."""

    samples: list[TrainSample]
    advantages: dict[Literal["agent", "designer"], list[float]]
