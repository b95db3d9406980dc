"""The typed data that flows between the six steps of a cycle.

design → :class:`Design` (one designer completion and its parse; frozen)
validate → :class:`Validated` (a design and its frozen :class:`Verdict`: the sandbox report,
the pipeline stages' results as :class:`Evidence`, a kept repair, a copy, the self-judge)
play → :class:`PlayedEnv` (one environment's returns) and :class:`Episode` (one played episode
with its agent-role samples)
score → :class:`Scored` (a reward-carrying unit: one episode or one designer completion)
advantage → :class:`Batch` (the joint training batch, advantages set, with per-role stats)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

import spade_corpus as sc
import spade_envs as se

from spade_train.core import judges
from spade_train.core.pool import PoolEntry
from spade_train.types import JSON, Generation, Message, Role, TrainSample


@dataclass(frozen=True)
class Design:
    """One designer completion as step 1 parsed it (never changed afterwards: a retry or a
    repair is a new ``Design``)."""

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
    prompt: list[Message] = field(default_factory=list)
    """The conversation this completion answers (retries and repairs reuse it)."""

    @property
    def parsed(self) -> bool:
        """The reply gave a source (and a hint) that validation can judge."""
        return self.parse_error is None and self.source is not None


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a slot, or a repair turn: why it failed, and its text (cut)."""

    reason: str | None
    message: str | None
    text: str
    turn: int | None = None

    def to_dict(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"reason": self.reason, "message": self.message, "text": self.text}
        if self.turn is not None:
            out["turn"] = self.turn
        return out


@dataclass(frozen=True)
class Evidence:
    """What the stages of step 2 (and the self-judge after play) recorded about a slot: its
    earlier attempts, the reset gate's and the LLM validator's results, the repair turns and
    the first turn's failure when a repair was kept, whether the time budget ran out."""

    attempts: tuple[Attempt, ...] = ()
    reset_gate: judges.GateResult | None = None
    validator: judges.Verdict | None = None
    repairs: tuple[Attempt, ...] = ()
    turn1: tuple[str | None, str | None] | None = None
    """The first turn's reason and message, when a repair turn's environment was kept."""
    budget_exhausted: bool = False
    self_judge: judges.Verdict | None = None

    def to_dict(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        if self.attempts:
            out["attempts"] = [a.to_dict() for a in self.attempts]
        if self.reset_gate is not None:
            out["reset_gate"] = self.reset_gate.to_dict()
        if self.validator is not None:
            out["validator"] = self.validator.to_dict()
        if self.repairs:
            out["repairs"] = [a.to_dict() for a in self.repairs]
        if self.turn1 is not None:
            out["turn1"] = {"reason": self.turn1[0], "message": self.turn1[1]}
        if self.budget_exhausted:
            out["budget_exhausted"] = True
        if self.self_judge is not None:
            out["self_judge"] = self.self_judge.to_dict()
        return out


@dataclass(frozen=True)
class Verdict:
    """What step 2 (and the self-judge after play) decided about one designer slot."""

    report: sc.ValidationReport | None = None
    """The sandbox validator's report on the slot's environment (None: never validated)."""
    rejected: str | None = None
    """A pipeline stage's reason code (``spade_train.reasons.PIPELINE_REASONS``) after the
    sandbox passed it; ``rejected_message`` says why."""
    rejected_message: str | None = None
    repair: Design | None = None
    """The repair turn's design whose environment the slot keeps (the trained reply is still
    the first one)."""
    repaired_turn: int | None = None
    copy_of: str | None = None
    """A valid design that is an exact or near duplicate of a scaffold example or a shipped
    corpus game: that game's id (``steps.validate.mark_copies``). It still enters the pool."""
    judged_invalid: bool = False
    """The self-judge answered no (the designer's reward takes its penalty)."""
    evidence: Evidence = field(default_factory=Evidence)


@dataclass(frozen=True)
class Validated:
    """A designer slot after step 2: the trained design and its verdict."""

    design: Design
    verdict: Verdict = field(default_factory=Verdict)

    @property
    def env(self) -> Design:
        """The design whose environment the slot has: a kept repair's, else its own."""
        return self.verdict.repair or self.design

    @property
    def env_id(self) -> str | None:
        return self.env.env_id

    @property
    def skill(self) -> str:
        return self.design.skill

    @property
    def parsed(self) -> bool:
        return self.env.parsed

    @property
    def valid(self) -> bool:
        v = self.verdict
        return v.rejected is None and v.report is not None and v.report.valid

    @property
    def reason(self) -> str | None:
        if self.env.parse_error:
            return self.env.parse_error
        if self.verdict.rejected:
            return self.verdict.rejected
        return None if self.verdict.report is None else self.verdict.report.reason

    @property
    def message(self) -> str | None:
        """Why it failed, in words (the parse's, the stage's or the validator's message)."""
        if self.env.parse_error:
            return self.env.parse_message
        if self.verdict.rejected:
            return self.verdict.rejected_message
        return None if self.verdict.report is None else self.verdict.report.message

    def to_row(self) -> dict[str, JSON]:
        env, v = self.env, self.verdict
        return {
            "prompt": self.design.prompt_index,
            "completion": self.design.completion_index,
            "skill": self.design.skill,
            "env_id": env.env_id,
            "valid": self.valid,
            "reason": self.reason,
            "parse_message": env.parse_message,
            "hint": env.hint,
            "text": self.design.text,
            "report": None if v.report is None else v.report.to_dict(),
            "completion_tokens": len(self.design.generation.completion_ids),
            "rejected_message": v.rejected_message,
            "copy_of": v.copy_of,
            "repaired_turn": v.repaired_turn,
            "pipeline": v.evidence.to_dict(),
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
    group: tuple[str | int | bool, ...]
    reward: float
    samples: list[TrainSample]

    def to_json(self) -> dict[str, JSON]:
        """JSON data (delayed designer items are checkpointed)."""
        return {
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "reward": self.reward,
            "group": list(self.group),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON], role: Role = "designer") -> Scored:
        group = cast("list[str | int | bool]", data["group"])
        samples = cast("list[dict[str, list[int]]]", data["samples"])
        return cls(
            role,
            tuple(group),
            float(cast(float, data["reward"])),
            [TrainSample(**s) for s in samples],  # type: ignore[arg-type]
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
