"""Typed errors of the sandbox: one root (`SandboxError`) and one subclass per reason code.

Every error carries a `ReasonCode` so a caller can tell an environment's own failure
(`env_exception`, `bad_return`, `timeout`, ...) from a fault of the sandbox itself
(`infrastructure`, see `SandboxError.is_infrastructure`): the latter must never be scored as
the environment's reward. Errors pickle (Ray carries them between processes).
"""

from __future__ import annotations

from enum import Enum


class ReasonCode(str, Enum):  # noqa: UP042 (str() must stay "ReasonCode.X"; StrEnum changes it)
    """Why a sandboxed call failed; the value is the stable string written to logs and records."""

    TIMEOUT = "timeout"
    """A call ran past its wall-clock or CPU-time limit and the worker was killed."""
    MEMORY = "memory"
    """The environment ran out of its address-space limit."""
    CRASHED = "crashed"
    """The worker died (signal, exit, `sys.exit`) in the middle of a call."""
    FORBIDDEN_SYSCALL = "forbidden_syscall"
    """The seccomp filter killed the worker for a system call environments never need."""
    FORBIDDEN_IMPORT = "forbidden_import"
    """The source imported a module outside the allow-list."""
    BAD_RETURN = "bad_return"
    """A method returned the wrong type or shape, a non-finite reward, or non-JSON data."""
    OUTPUT_TOO_LARGE = "output_too_large"
    """A reply or captured output exceeded `Limits.max_output_kib`."""
    PROTOCOL_ERROR = "protocol_error"
    """The worker's channel broke or carried something that is not a valid frame."""
    ENV_EXCEPTION = "env_exception"
    """The environment's own code raised; the message carries the exception type and text."""
    LIMIT_EXCEEDED = "limit_exceeded"
    """A per-episode limit (`max_steps`, `episode_wall_s`) was reached."""
    DISK_QUOTA = "disk_quota"
    """The work directory went over `Limits.max_disk_mib` bytes or `Limits.max_disk_files` files."""
    INFRASTRUCTURE = "infrastructure"
    """The sandbox itself failed (could not start a worker, a required layer is missing)."""


class SandboxError(RuntimeError):
    """Root of all sandbox errors; `.reason` says which family, `.is_infrastructure` whose fault."""

    default_reason = ReasonCode.INFRASTRUCTURE
    stepped: list | None = None
    """For a failed ``steps`` call: the raw results of the steps before the failing one."""

    def __init__(self, message: str, reason: ReasonCode | str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = ReasonCode(reason) if reason is not None else self.default_reason

    @property
    def is_infrastructure(self) -> bool:
        """True when the sandbox, not the environment's code, is at fault."""
        return self.reason is ReasonCode.INFRASTRUCTURE

    def __reduce__(self):
        return (error_for, (self.reason.value, self.message))

    def __str__(self) -> str:
        return f"[{self.reason.value}] {self.message}"


class SandboxTimeout(SandboxError, TimeoutError):
    default_reason = ReasonCode.TIMEOUT


class SandboxMemoryError(SandboxError, MemoryError):
    default_reason = ReasonCode.MEMORY


class SandboxCrashed(SandboxError):
    default_reason = ReasonCode.CRASHED


class ForbiddenSyscall(SandboxError, PermissionError):
    default_reason = ReasonCode.FORBIDDEN_SYSCALL


class ForbiddenImport(SandboxError, ImportError):
    default_reason = ReasonCode.FORBIDDEN_IMPORT


class BadReturn(SandboxError, TypeError):
    default_reason = ReasonCode.BAD_RETURN


class OutputTooLarge(SandboxError):
    default_reason = ReasonCode.OUTPUT_TOO_LARGE


class ProtocolError(SandboxError):
    default_reason = ReasonCode.PROTOCOL_ERROR


class EnvException(SandboxError):
    default_reason = ReasonCode.ENV_EXCEPTION


class LimitExceeded(SandboxError):
    default_reason = ReasonCode.LIMIT_EXCEEDED


class DiskQuotaExceeded(SandboxError):
    default_reason = ReasonCode.DISK_QUOTA


class InfrastructureError(SandboxError):
    default_reason = ReasonCode.INFRASTRUCTURE


_CLASS_FOR_REASON: dict[ReasonCode, type[SandboxError]] = {
    cls.default_reason: cls
    for cls in (
        SandboxTimeout,
        SandboxMemoryError,
        SandboxCrashed,
        ForbiddenSyscall,
        ForbiddenImport,
        BadReturn,
        OutputTooLarge,
        ProtocolError,
        EnvException,
        LimitExceeded,
        DiskQuotaExceeded,
        InfrastructureError,
    )
}


def error_for(reason: ReasonCode | str, message: str) -> SandboxError:
    """The error of the family that `reason` names (unknown strings become `protocol_error`)."""
    try:
        code = ReasonCode(reason)
    except ValueError:
        return ProtocolError(f"worker sent an unknown reason code {reason!r}: {message}")
    return _CLASS_FOR_REASON[code](message, code)
