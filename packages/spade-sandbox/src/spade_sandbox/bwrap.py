"""The bubblewrap side of the process backend: the flags and mounts of a sandboxed worker, and
the extra read-only ``python_path`` directories (e.g. numpy's site-packages in compat mode)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .limits import SandboxConfig

WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
#: The modules of the in-sandbox worker program (in WORKER_DIR, standard library only), in an
#: order where each imports only modules before it; "worker" is the entry point.
WORKER_MODULES = (
    "wire",
    "worker_state",
    "worker_layers",
    "worker_env",
    "worker_twins",
    "worker_zygote",
    "worker",
)
SANDBOX_WORKER_DIR = "/opt/spade_sandbox"
SANDBOX_WORK_DIR = "/work"
SANDBOX_PATH_DIR = "/opt/spade_python_path"  # python_path directory i is mounted at /i
NOBODY = 65534
# Variables the child gets; nothing is inherited from the host.
SCRUBBED_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    # one BLAS thread: a library preloaded in the zygote must not hold threads across fork()
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def interpreter() -> tuple[str, str]:
    """The base interpreter (not a venv shim) and its prefix: the worker needs only the stdlib."""
    return os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)


def python_path(config: SandboxConfig) -> list[str]:
    """Directories from ``backend_options["python_path"]`` (``os.pathsep``-separated), made
    readable and importable inside the sandbox, for allowed modules outside the standard library
    (e.g. the site-packages holding numpy). The import allow-list still decides what the
    environment may import; what is mounted is read-only."""
    raw = config.backend_options.get("python_path", "")
    return [os.path.realpath(p) for p in raw.split(os.pathsep) if p and os.path.isdir(p)]


def inner_paths(extra: Sequence[str], bwrap: str | None) -> list[str]:
    """Where the ``python_path`` directories are seen by the worker."""
    return [f"{SANDBOX_PATH_DIR}/{i}" for i in range(len(extra))] if bwrap else list(extra)


def bwrap_flags(as_root: bool) -> list[str]:
    # As root there is no user namespace: the worker drops to the real uid 65534 itself,
    # which a user namespace would map back to root outside.
    ns = [
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not as_root:
        ns = ["--unshare-all"]
    return [*ns, "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv",
            *[a for k, v in SCRUBBED_ENV.items() for a in ("--setenv", k, v)]]  # fmt: skip


def bwrap_mounts(work_dir: str, extra: Sequence[str] = ()) -> list[str]:
    _, prefix = interpreter()
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    if not prefix.startswith("/usr/"):
        # bwrap creates missing parents as 0700, which uid 65534 could not traverse.
        parents = []
        parent = os.path.dirname(prefix)
        while parent not in ("/", ""):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for parent in reversed(parents):
            args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    if extra:
        args += ["--perms", "0755", "--dir", SANDBOX_PATH_DIR]
    for i, path in enumerate(extra):
        args += ["--ro-bind", path, f"{SANDBOX_PATH_DIR}/{i}"]
    args += ["--ro-bind", WORKER_DIR, SANDBOX_WORKER_DIR, "--dev", "/dev", "--tmpfs", "/tmp",
             "--bind", work_dir, SANDBOX_WORK_DIR, "--chdir", SANDBOX_WORK_DIR]  # fmt: skip
    return args
