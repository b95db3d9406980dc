"""spade-sandbox: run untrusted environment source in isolation (see the package README)."""

from importlib.metadata import version as _version

from .errors import (
    BadReturn,
    EnvException,
    ForbiddenImport,
    ForbiddenSyscall,
    InfrastructureError,
    LimitExceeded,
    OutputTooLarge,
    ProtocolError,
    ReasonCode,
    SandboxCrashed,
    SandboxError,
    SandboxMemoryError,
    SandboxTimeout,
)
from .limits import DEFAULT_ALLOWED_IMPORTS, LAYERS, Limits, SandboxConfig
from .protocol import Backend, FramedWorker, WorkerHandle, describe_exit, get_backend, register_backend

__version__ = _version("spade-sandbox")

__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "LAYERS",
    "Backend",
    "BadReturn",
    "EnvException",
    "ForbiddenImport",
    "ForbiddenSyscall",
    "FramedWorker",
    "InfrastructureError",
    "LimitExceeded",
    "Limits",
    "OutputTooLarge",
    "ProtocolError",
    "ReasonCode",
    "SandboxConfig",
    "SandboxCrashed",
    "SandboxError",
    "SandboxMemoryError",
    "SandboxTimeout",
    "WorkerHandle",
    "__version__",
    "describe_exit",
    "get_backend",
    "register_backend",
]
