"""The sandbox protocol: what a backend is, and the host side of the wire that all share.

A backend (`Backend`) starts workers: sandboxed processes running worker.py, each serving
exactly one environment source (or one script) over framed JSON (wire.py), never another, so
no environment ever sees another's state (`reopen` constructs the same source again). `WorkerHandle` is the host's grip on one worker.
`FramedWorker` implements the handle over a pair of file descriptors (requests, replies);
a backend subclasses it and supplies how to kill, reap and describe the death of its
process. Backends are registered by name (`register_backend`, duplicates refused) and looked
up with `get_backend`; "process" and "docker" are registered by the package. The "docker"
entry imports `spade_sandbox.docker_backend` on first use and calls its `DockerBackend()`.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from . import wire
from .errors import (
    DiskQuotaExceeded,
    InfrastructureError,
    OutputTooLarge,
    ProtocolError,
    ReasonCode,
    SandboxError,
    SandboxTimeout,
    error_for,
)
from .limits import SandboxConfig
from .quota import DiskQuota, QuotaMeter

FATAL_REASONS = frozenset(
    {
        ReasonCode.TIMEOUT,
        ReasonCode.MEMORY,
        ReasonCode.CRASHED,
        ReasonCode.FORBIDDEN_SYSCALL,
        ReasonCode.FORBIDDEN_IMPORT,
        ReasonCode.OUTPUT_TOO_LARGE,
        ReasonCode.PROTOCOL_ERROR,
        ReasonCode.DISK_QUOTA,
        ReasonCode.INFRASTRUCTURE,
    }
)
"""Reasons after which a worker is not used again (it is killed, or it exits by itself)."""


@runtime_checkable
class WorkerHandle(Protocol):
    """One started worker, as the host sees it."""

    layers: dict[str, str]
    """Isolation layer name -> "active[: detail]" or "unavailable: why"."""
    work_dir: str
    """The worker's private work directory on the host (for diagnostics)."""

    @property
    def alive(self) -> bool: ...

    def request(self, message: dict, timeout_s: float, reply_cap: int) -> object:
        """Send one request and return the reply's value, or raise a `SandboxError`.

        After a fatal error (`FATAL_REASONS`) the worker is dead and reaped."""
        ...

    def close(self) -> None:
        """Ask the worker to close, then kill and reap it and remove its work dir; idempotent."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Starts isolated workers; the same worker program and wire protocol for every backend."""

    name: str

    def start(self, config: SandboxConfig) -> WorkerHandle:
        """A worker that answered `init`, its layers applied; raises `InfrastructureError`."""
        ...

    def host_layers(self, config: SandboxConfig) -> dict[str, str]:
        """Layers this backend provides outside the worker, for `doctor` (no worker started)."""
        ...


class FramedWorker:
    """Host side of a worker reached through a request fd and a reply fd.

    Subclasses implement `_kill()` (kill everything the worker started, from outside),
    `_reap(timeout_s) -> int | None` (wait for the exit status: >= 0 exit code, < 0 signal),
    and may override `_cleanup()` (release fds, work dir) and `_stderr_tail()`.
    """

    def __init__(self, request_fd: int, reply_fd: int, work_dir: str) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.work_dir = work_dir
        self.layers: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._dead = False
        self._closed = False
        self._lock = threading.Lock()
        self.disk_quota: DiskQuota | None = None
        """Set by a backend whose work directory is not size-limited by the kernel."""
        self._meter: QuotaMeter | None = None
        self.cpu_limit_s: float | None = None
        """`Limits.cpu_s` of this worker (set by the backend), to judge a SIGKILL."""
        self._replies = wire.FrameReader(reply_fd)
        os.set_blocking(request_fd, False)
        os.set_blocking(reply_fd, False)

    # -- to implement -----------------------------------------------------------------
    def _kill(self) -> None:
        raise NotImplementedError

    def _reap(self, timeout_s: float) -> int | None:
        raise NotImplementedError

    def _cleanup(self) -> None:
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def _stderr_tail(self) -> str:
        return ""

    def _cpu_seconds(self) -> float | None:
        """CPU seconds the dead worker used, where the backend can tell (evidence for a SIGKILL)."""
        return None

    def _disk_path(self) -> str | None:
        """The host path of the work directory to account against `disk_quota`, if any."""
        return None

    # -- shared -----------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._dead

    def request(self, message: dict, timeout_s: float, reply_cap: int) -> object:
        return self.receive(self.send(message, timeout_s), reply_cap)

    def send(self, message: dict, timeout_s: float) -> Call:
        """The first half of `request`: write the request and return without its reply.

        The worker is reserved for this call until `receive(call, ...)` returns, which the
        caller must do (also after an error elsewhere); meanwhile the worker computes, so a
        caller can send to many workers and then collect, with no thread per worker."""
        self._lock.acquire()
        try:
            if self._dead:
                raise ProtocolError("this worker is no longer running")
            poll = self._quota_poll() if message["op"] != "close" else None
            call = Call(next(self._ids), str(message.get("op")), timeout_s,
                        time.monotonic() + timeout_s, poll)  # fmt: skip
            try:
                wire.write_frame(self.request_fd, {**message, "id": call.rid}, call.deadline)
            except Exception as exc:
                raise self._call_error(exc, call) from None
        except BaseException:
            self._lock.release()
            raise
        return call

    def receive(self, call: Call, reply_cap: int) -> object:
        """The second half of `request`: wait for the reply to `call` (sent by `send`)."""
        try:
            try:
                reply = self._replies.read(
                    reply_cap + wire.FRAME_OVERHEAD_BYTES, call.deadline, call.poll
                )
                if call.poll is not None:
                    call.poll()  # what the call left behind counts too
            except Exception as exc:
                raise self._call_error(exc, call) from None
            return self._reply_value(reply, call)
        finally:
            self._lock.release()

    def _call_error(self, exc: Exception, call: Call) -> Exception:
        """What a failed write or read of `call` raises (the worker killed where it must be)."""
        op = call.op
        if isinstance(exc, _OverQuota):
            self._die()
            return DiskQuotaExceeded(f"{op}: {exc}; the worker was killed")
        if isinstance(exc, TimeoutError):
            self._die()
            return SandboxTimeout(
                f"{op} did not finish within {call.timeout_s:g} s (Limits.call_wall_s)"
            )
        if isinstance(exc, wire.FrameError):
            if exc.kind == "eof":
                return self._death_error(op)
            self._die()
            if exc.kind == "too_large":
                return OutputTooLarge(f"{op} reply: {exc} (Limits.max_output_kib)")
            return ProtocolError(f"{op} reply: {exc}")
        if isinstance(exc, (TypeError, ValueError)):  # the request itself is not JSON
            return TypeError(f"cannot send {op} request: {exc}")
        return exc

    def _reply_value(self, reply: object, call: Call) -> object:
        if (
            not isinstance(reply, dict)
            or reply.get("id") != call.rid
            or not isinstance(reply.get("ok"), bool)
            or self._replies.pending
        ):
            self._die()
            raise ProtocolError(
                f"{call.op}: the worker sent a malformed, out-of-order or unsolicited reply"
            )
        if reply["ok"]:
            return reply.get("value")
        error = error_for(str(reply.get("reason")), str(reply.get("message", ""))[:8000])
        if error.is_infrastructure:
            # Only the host decides that the sandbox failed; code in the worker could
            # forge this reason to keep its own failures from being scored.
            error = ProtocolError(f"the worker claimed an infrastructure fault: {error.message}")
        if isinstance(reply.get("stepped"), list):
            error.stepped = reply["stepped"]
        if error.reason in FATAL_REASONS:
            self._die()
        raise error

    def _quota_poll(self) -> Callable[[], None] | None:
        """The check of the work directory against `disk_quota` (None: nothing to account)."""
        quota, path = self.disk_quota, self._disk_path()
        if quota is None or path is None:
            return None
        meter = self._meter
        if meter is None or meter.quota != quota or meter.path != path:
            meter = self._meter = QuotaMeter(quota, path)

        def poll() -> None:
            excess = meter.excess()
            if excess is not None:
                raise _OverQuota(excess)

        return poll

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A call sent and never received holds the worker: then it is killed without asking
        # (waiting for the lock would hang the caller).
        if not self._dead and not self._lock.locked():
            try:
                self.request({"op": "close"}, 1.0, 1024)
            except SandboxError:
                pass
        self._die()
        self._cleanup()

    def _die(self) -> None:
        """Kill from outside and reap; safe to call twice."""
        if not self._dead:
            self._dead = True
            self._kill()
        self._reap(5.0)

    def _death_error(self, op: object) -> SandboxError:
        self._dead = True
        status = self._reap(2.0)
        if status is None:
            self._kill()
            status = self._reap(5.0)
        if status == -signal.SIGKILL:
            return self._sigkill_error(f"during {op}")
        return describe_exit(status, f"during {op}", self._stderr_tail())

    def _sigkill_error(self, when: str) -> SandboxError:
        """Whose fault a SIGKILL the host did not send is, decided by evidence.

        The environment cannot send SIGKILL to itself (the seccomp filter kills the worker
        with SIGSYS for that), so with seccomp active a SIGKILL comes from its CPU limit
        (RLIMIT_CPU's hard limit, when SIGXCPU was ignored: the CPU time used shows it) or
        from outside the sandbox (another process, the kernel's OOM killer): infrastructure."""
        cpu = self._cpu_seconds()
        if cpu is not None and self.cpu_limit_s is not None and cpu >= self.cpu_limit_s - 0.1:
            return SandboxTimeout(
                f"the worker used up its CPU time {when} ({cpu:.1f} s, Limits.cpu_s) and was killed"
            )
        if not self.layers.get("seccomp", "").startswith("active"):
            return error_for(ReasonCode.CRASHED, f"the worker was killed by SIGKILL {when}")
        used = f" after {cpu:.2f} s of CPU" if cpu is not None else ""
        return InfrastructureError(
            f"the worker was killed by SIGKILL {when}{used}, sent neither by the host nor by its "
            "limits, and the environment cannot send it: an outside kill or the kernel's OOM killer"
        )


class _OverQuota(Exception):
    pass


@dataclass(slots=True)
class Call:
    """A request `FramedWorker.send` wrote, whose reply `FramedWorker.receive` reads."""

    rid: int
    op: str
    timeout_s: float
    deadline: float
    poll: Callable[[], None] | None


def describe_exit(status: int | None, when: str, stderr_tail: str = "") -> SandboxError:
    """The error for a worker that died on its own: exit status >= 0, or -signal."""
    tail = f"; stderr: {stderr_tail.strip()[-500:]}" if stderr_tail.strip() else ""
    if status is None:
        return InfrastructureError(f"the worker could not be reaped {when}")
    if status < 0:
        sig = -status
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        if sig == signal.SIGSYS:
            return error_for(
                ReasonCode.FORBIDDEN_SYSCALL,
                f"the seccomp filter killed the worker {when} (a system call environments may not make){tail}",
            )
        if sig == signal.SIGXCPU:
            return error_for(
                ReasonCode.TIMEOUT, f"the worker used up its CPU time {when} (Limits.cpu_s)"
            )
        if sig == signal.SIGXFSZ:
            return error_for(
                ReasonCode.OUTPUT_TOO_LARGE,
                f"the worker wrote a file past Limits.max_file_mib {when}",
            )
        return error_for(ReasonCode.CRASHED, f"the worker was killed by {name} {when}{tail}")
    if status == wire.EXIT_CHANNEL_BROKEN:
        return error_for(
            ReasonCode.PROTOCOL_ERROR,
            f"the worker's channel broke {when} (the environment closed or wrote to the protocol descriptors)",
        )
    return error_for(ReasonCode.CRASHED, f"the worker exited with status {status} {when}{tail}")


_REGISTRY: dict[str, Callable[[], Backend]] = {}
_INSTANCES: dict[str, Backend] = {}
_REGISTRY_LOCK = threading.Lock()


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Register a backend factory under `name`; a second registration of a name is refused."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"backend name must be a non-empty string, got {name!r}")
    with _REGISTRY_LOCK:
        if name in _REGISTRY:
            raise ValueError(f"sandbox backend {name!r} is already registered")
        _REGISTRY[name] = factory


def get_backend(name: str) -> Backend:
    """The backend registered as `name` (created once); unknown names list the known ones."""
    with _REGISTRY_LOCK:
        if name in _INSTANCES:
            return _INSTANCES[name]
        factory = _REGISTRY.get(name)
        if factory is None:
            raise ValueError(
                f"unknown sandbox backend {name!r}; registered: {', '.join(sorted(_REGISTRY))}"
            )
        backend = factory()
        _INSTANCES[name] = backend
        return backend


def backend_names() -> list[str]:
    """Names of the registered backends, sorted."""
    with _REGISTRY_LOCK:
        return sorted(_REGISTRY)


log = logging.getLogger("spade_sandbox")
_warned: set[str] = set()
_warned_lock = threading.Lock()


def start_worker(config: SandboxConfig) -> WorkerHandle:
    """A fresh worker from the configured backend, with `require_layers` enforced and every
    other missing layer logged once per process."""
    return check_layers(get_backend(config.backend).start(config), config)


def check_layers(worker: WorkerHandle, config: SandboxConfig) -> WorkerHandle:
    """Refuse (close) a worker missing a required layer; log other missing layers once."""
    inactive = {
        name: state for name, state in worker.layers.items() if not state.startswith("active")
    }
    missing = sorted(
        n for n in config.require_layers if not worker.layers.get(n, "").startswith("active")
    )
    if missing:
        worker.close()
        details = "; ".join(
            f"{name}: {inactive.get(name, 'not reported by the backend')}" for name in missing
        )
        raise InfrastructureError(
            f"required isolation layer(s) not active ({details}); run `spade-sandbox doctor`"
        )
    with _warned_lock:
        for name, state in sorted(inactive.items()):
            if name not in _warned:
                _warned.add(name)
                log.warning(
                    "spade-sandbox: isolation layer %s is %s; continuing without it", name, state
                )
    return worker
