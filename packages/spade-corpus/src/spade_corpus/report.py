"""What validating one environment yields: :class:`ValidationReport`, and how a checker or
sandbox failure becomes one reason code (:func:`classify`).

:mod:`spade_corpus.validate` (strict mode) and :mod:`spade_corpus.compat_validation` (compat
mode) both build their reports from this module, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import spade_envs as se
import spade_sandbox as ss

__all__ = ["RuntimeFailure", "ValidationReport", "classify", "one_line"]

_MESSAGE_CHARS = 400


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one environment.

    ``valid``: it passed every check. ``reason``: one code of :data:`VALIDATION_REASONS` (None
    when valid). ``message``: one line saying what failed and how to fix it. ``stage``: the last
    stage run, ``"structural"`` or ``"runtime"``. ``infrastructure``: the sandbox or validator
    failed, so the environment was not judged. ``sandbox_reason``: the spade-sandbox reason
    behind the failure, if any. ``evidence``: see the field. ``checks``: what was measured (class name, sizes, seeds, steps,
    solution turns, per-stage seconds). ``wall_s``: seconds the whole validation took.
    """

    valid: bool
    reason: str | None
    message: str
    stage: str
    checks: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    env_id: str | None = None
    infrastructure: bool = False
    sandbox_reason: str | None = None
    evidence: dict[str, Any] | None = None
    """What the rejection saw, ``spade_envs.Evidence.to_dict()``: ``probe`` (the policy or check),
    ``seed`` and ``excerpt`` (of the observation or action at fault); None when the check that
    failed records none (structural and sandbox rejections)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``validation_manifest.jsonl`` row: JSON data, ``id`` first."""
        return {
            "id": self.env_id,
            "valid": self.valid,
            "reason": self.reason,
            "message": self.message,
            "stage": self.stage,
            "infrastructure": self.infrastructure,
            "sandbox_reason": self.sandbox_reason,
            "checks": self.checks,
            "wall_s": round(self.wall_s, 4),
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> ValidationReport:
        """Read back a row written by :meth:`to_dict`."""
        return cls(
            valid=bool(row["valid"]),
            reason=row.get("reason"),
            message=row.get("message", ""),
            stage=row.get("stage", "runtime"),
            checks=dict(row.get("checks") or {}),
            wall_s=float(row.get("wall_s", 0.0)),
            env_id=row.get("id"),
            infrastructure=bool(row.get("infrastructure", False)),
            sandbox_reason=row.get("sandbox_reason"),
            evidence=row.get("evidence"),
        )


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MESSAGE_CHARS else line[: _MESSAGE_CHARS - 1] + "…"


class RuntimeFailure(Exception):
    """A runtime-stage rejection on its way to a ValidationReport."""

    def __init__(
        self,
        reason: str,
        message: str,
        sandbox_reason: str | None,
        infrastructure: bool,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason, message)
        self.reason, self.message = reason, message
        self.sandbox_reason, self.infrastructure = sandbox_reason, infrastructure
        self.evidence = evidence


def classify(
    code: str | None,
    message: str,
    cause: BaseException | None,
    evidence: se.Evidence | None = None,
) -> RuntimeFailure:
    """Map a checker code and its cause to one reason: the sandbox's when it stopped the env;
    the checker's ``evidence`` goes with a reason of the checker's."""
    if isinstance(cause, ss.SandboxError):
        sandbox_reason = ss.ReasonCode(cause.reason).value
        if sandbox_reason != ss.ReasonCode.ENV_EXCEPTION.value or code is None:
            return RuntimeFailure(
                f"sandbox_{sandbox_reason}", message, sandbox_reason, cause.is_infrastructure
            )
        return RuntimeFailure(code, message, sandbox_reason, False, _data(evidence))
    return RuntimeFailure(code or "validator_error", message, None, code is None, _data(evidence))


def _data(evidence: se.Evidence | None) -> dict[str, Any] | None:
    return None if evidence is None else dict(evidence.to_dict())
