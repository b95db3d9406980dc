"""spade-sandbox: run untrusted environment source in isolation (see the package README)."""

from importlib.metadata import version as _version

from .doctor import doctor_layers, doctor_report
from .environment import SandboxedEnv, open_env
from .errors import (
    BadReturn,
    DiskQuotaExceeded,
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
from .pool import SandboxPool
from .process import ProcessBackend
from .protocol import (
    Backend,
    FramedWorker,
    WorkerHandle,
    backend_names,
    describe_exit,
    get_backend,
    register_backend,
    start_worker,
)
from .result import ExecResult
from .script import run
from .worker_twins import analyse as analyse_twins


def _docker_backend() -> Backend:
    # Imported on first use: the docker SDK is an optional extra.
    from .docker_backend import DockerBackend

    return DockerBackend()


register_backend("process", ProcessBackend)
register_backend("docker", _docker_backend)

__version__ = _version("spade-sandbox")

__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "ExecResult",
    "ProcessBackend",
    "SandboxPool",
    "SandboxedEnv",
    "analyse_twins",
    "backend_names",
    "doctor_layers",
    "doctor_report",
    "open_env",
    "run",
    "start_worker",
    "LAYERS",
    "Backend",
    "BadReturn",
    "EnvException",
    "ForbiddenImport",
    "ForbiddenSyscall",
    "FramedWorker",
    "InfrastructureError",
    "DiskQuotaExceeded",
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
