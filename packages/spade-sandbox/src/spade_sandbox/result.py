"""Typed results of sandboxed runs."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ReasonCode


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a one-off script run by `run()`; a failing script is data, not an exception."""

    returncode: int
    """The script's exit status: 0, its `sys.exit` code, 1 for an uncaught exception, -9 when killed."""
    stdout: str
    """What the script printed (capped at `Limits.max_output_kib`)."""
    stderr: str
    """Tracebacks and what it printed to `sys.stderr` (capped the same way)."""
    wall_s: float
    """Wall-clock seconds from sending the script to its result."""
    reason: ReasonCode | None
    """None when the script ran to its end (whatever its exit status), else why it did not."""

    @property
    def ok(self) -> bool:
        """True when the script ran to its end with exit status 0."""
        return self.reason is None and self.returncode == 0
