"""The process backend: a child interpreter behind bubblewrap, a dropped uid, Landlock,
rlimits and seccomp, each layer detected and reported, a missing one logged, never silent.

The host starts `bwrap` (namespaces: pid, net, ipc, uts, mount; read-only system dirs,
the interpreter and the worker directory; a private writable work dir at /work; an empty
/tmp; a scrubbed environment) running worker.py; the worker applies the in-process layers
itself before it loads any untrusted code (see worker.py). Deadlines are enforced here by
killing the whole process group with SIGKILL; every child is reaped.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence

from .bwrap import (  # noqa: F401  (the constants are re-exported for the Docker backend)
    NOBODY,
    SANDBOX_PATH_DIR,
    SANDBOX_WORK_DIR,
    SANDBOX_WORKER_DIR,
    SCRUBBED_ENV,
    WORKER_DIR,
    WORKER_MODULES,
    bwrap_flags,
    bwrap_mounts,
    inner_paths,
    interpreter,
    python_path,
)
from .errors import InfrastructureError, SandboxError
from .limits import BWRAP_VARIABLE, SandboxConfig, bwrap_wanted
from .protocol import FramedWorker
from .quota import DiskQuota
from .spawn import spawn


@functools.lru_cache(maxsize=1)
def bwrap_status() -> tuple[str | None, str]:
    """(path to a working bwrap or None, description); probed once per process.
    `SPADE_SANDBOX_BWRAP=off` hides an installed bwrap (see `limits.bwrap_wanted`)."""
    try:
        if not bwrap_wanted():
            return None, f"unavailable: turned off by {BWRAP_VARIABLE}=off"
    except ValueError as exc:
        raise InfrastructureError(str(exc)) from None
    path = shutil.which("bwrap")
    if path is None:
        return None, "unavailable: bubblewrap is not installed (apt-get install bubblewrap)"
    python, _ = interpreter()
    argv = [
        path,
        *bwrap_flags(os.getuid() == 0),
        *bwrap_mounts(tempfile.gettempdir()),
        "--",
        python,
        "-S",
        "-c",
        "pass",
    ]
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=SCRUBBED_ENV)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"unavailable: bubblewrap failed to start ({exc})"
    if probe.returncode != 0:
        return None, f"unavailable: bubblewrap does not work here ({probe.stderr.strip()[:200]})"
    return path, "active: bubblewrap (pid, net, ipc, uts, mount namespaces; read-only system dirs)"


def _tail(stderr_file, size: int = 2000) -> str:
    """The last `size` bytes a worker wrote to its private stderr file, as text."""
    try:
        end = os.fstat(stderr_file.fileno()).st_size
        return os.pread(stderr_file.fileno(), size, max(0, end - size)).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


class ProcessWorker(FramedWorker):
    """One worker process (bwrap + interpreter) and its private work dir and stderr file."""

    def __init__(
        self,
        proc: subprocess.Popen,
        request_fd: int,
        reply_fd: int,
        work_dir: str,
        stderr_file,
        via_bwrap: bool,
    ) -> None:
        super().__init__(request_fd, reply_fd, work_dir)
        self.proc = proc
        self.stderr_file = stderr_file
        self.via_bwrap = via_bwrap
        self.cpu_s: float | None = None

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self, timeout_s: float) -> int | None:
        status = self.proc.returncode
        if status is None:
            status = self._wait4(timeout_s)
            if status is None:
                return None
        # bwrap reports a child killed by signal N as exit status 128 + N.
        if self.via_bwrap and status > 128:
            return -(status - 128)
        return status

    def _wait4(self, timeout_s: float) -> int | None:
        """Reap the process with its resource usage (the CPU it used is evidence, see
        `FramedWorker._sigkill_error`); None when it is still running after `timeout_s`."""
        deadline, delay = time.monotonic() + timeout_s, 0.0005
        while True:
            try:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                return self.proc.wait()
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s = usage.ru_utime + usage.ru_stime
                return self.proc.returncode
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)

    def _cpu_seconds(self) -> float | None:
        return self.cpu_s

    def _disk_path(self) -> str | None:
        return self.work_dir

    def _stderr_tail(self) -> str:
        return _tail(self.stderr_file)

    def _cleanup(self) -> None:
        super()._cleanup()
        self.stderr_file.close()
        shutil.rmtree(self.work_dir, ignore_errors=True)


class ProcessBackend:
    """The default backend; works on a stock Linux machine, stronger with bubblewrap."""

    name = "process"

    def host_layers(self, config: SandboxConfig) -> dict[str, str]:
        path, ns_state = bwrap_status()
        return {
            "namespaces": ns_state,
            "scrubbed_env": "active: only " + ", ".join(sorted(SCRUBBED_ENV)),
            "private_workdir": "active: a fresh 0700 directory per worker"
            + (", mounted at /work" if path else ""),
        }

    def start(self, config: SandboxConfig) -> ProcessWorker:
        bwrap, _ = bwrap_status()
        python, prefix = interpreter()
        work_dir = tempfile.mkdtemp(prefix="spade-sandbox-", dir=config.work_root)
        as_root = os.getuid() == 0
        if as_root:
            os.chown(work_dir, NOBODY, NOBODY)
        extra = python_path(config)
        if bwrap:
            argv = [bwrap, *bwrap_flags(as_root), *bwrap_mounts(work_dir, extra), "--", python, "-S", "-B",
                    f"{SANDBOX_WORKER_DIR}/worker.py"]  # fmt: skip
            inner_work, read_paths = SANDBOX_WORK_DIR, [prefix, "/usr", SANDBOX_WORKER_DIR]
        else:
            argv = [python, "-S", "-B", os.path.join(WORKER_DIR, "worker.py")]
            inner_work, read_paths = work_dir, [prefix, "/usr", WORKER_DIR]
        paths = inner_paths(extra, bwrap)
        stderr_file = tempfile.TemporaryFile()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            proc = spawn(
                argv, stdin=req_r, stdout=rep_w, stderr=stderr_file, env=SCRUBBED_ENV, cwd=work_dir,
                close_fds=True, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            os.close(req_w)
            os.close(rep_r)
            stderr_file.close()
            shutil.rmtree(work_dir, ignore_errors=True)
            raise InfrastructureError(f"could not start the sandbox worker: {exc}") from None
        finally:
            os.close(req_r)  # the child's ends
            os.close(rep_w)
        worker = ProcessWorker(
            proc, req_w, rep_r, work_dir, stderr_file, via_bwrap=bwrap is not None
        )
        worker.layers = {
            **self.host_layers(config),
            **send_init(worker, config, inner_work, [*read_paths, *paths], paths),
        }
        return worker

    def start_zygote(self, config: SandboxConfig) -> Zygote:
        """A fork server for `SandboxPool`: fresh workers in about a millisecond each."""
        return Zygote(config, self.host_layers(config))


def send_init(
    worker: FramedWorker,
    config: SandboxConfig,
    work_dir: str,
    read_paths: list[str],
    paths: Sequence[str] = (),
) -> dict[str, str]:
    """Send `init` (the worker applies its layers); the layers it reports. Closes it on failure."""
    init = {
        "op": "init",
        "limits": config.limits.to_dict(),
        "allowed_imports": sorted(config.allowed_imports),
        "work_dir": work_dir,
        "read_paths": read_paths,
        "python_path": list(paths),
        "apply": ["unprivileged_uid", "landlock", "rlimits", "seccomp"],
    }
    started = time.monotonic()
    worker.cpu_limit_s = float(config.limits.cpu_s)
    if isinstance(worker, (ProcessWorker, ZygoteWorker)):  # a plain host directory: accounted
        mib = 1024 * 1024
        worker.disk_quota = DiskQuota(
            config.limits.max_disk_mib * mib, config.limits.max_disk_files
        )
    try:
        value = worker.request(init, config.start_timeout_s, 64 * 1024)
        return dict(value["layers"])  # type: ignore[index]  # a TypeError is caught below
    except (SandboxError, KeyError, TypeError) as exc:
        worker.close()
        raise InfrastructureError(
            f"the sandbox worker failed to start ({exc}) after {time.monotonic() - started:.2f} s"
        ) from None


class Zygote:
    """A preloaded interpreter inside one bubblewrap sandbox that forks fresh workers.

    Each forked worker applies its own uid drop, Landlock domain (its own work dir), rlimits
    and seccomp filter, exactly as a directly started one; what siblings share is the
    zygote's namespaces (no network, no /proc, SysV IPC denied by seccomp). The host kills
    and reaps workers through the zygote, which reports every exit status.
    """

    def __init__(self, config: SandboxConfig, host_layers: dict[str, str]) -> None:
        self.config = config
        self.work_root = tempfile.mkdtemp(prefix="spade-zygote-", dir=config.work_root)
        if os.getuid() == 0:
            os.chown(self.work_root, NOBODY, NOBODY)
        argv = self._command(config, host_layers)
        self.stderr_file = tempfile.TemporaryFile()
        self.sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = spawn(
                argv, stdin=child_sock.fileno(), stdout=subprocess.DEVNULL, stderr=self.stderr_file,
                env=SCRUBBED_ENV, cwd=self.work_root, close_fds=True, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            self.sock.close()
            self.stderr_file.close()
            shutil.rmtree(self.work_root, ignore_errors=True)
            raise InfrastructureError(f"could not start the sandbox zygote: {exc}") from None
        finally:
            child_sock.close()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._forked: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self.cpu_s: dict[int, float] = {}
        """CPU seconds each exited worker used, by pid."""
        self._ready = False
        self.alive = True
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(
            target=self._read_events, name="spade-sandbox-zygote", daemon=True
        )
        self._reader.start()
        self._send(
            {
                "op": "preload",
                "allowed_imports": sorted(config.allowed_imports),
                "python_path": self.python_path,
            }
        )
        with self._cond:
            self._cond.wait_for(lambda: self._ready or not self.alive, config.start_timeout_s)
            ok = self._ready
        if not ok:
            self.close()
            raise InfrastructureError(
                "the sandbox zygote did not start; run `spade-sandbox doctor`"
            )

    def _command(self, config: SandboxConfig, host_layers: dict[str, str]) -> list[str]:
        """The zygote's command line; sets where its workers' dirs and paths lie inside it
        and the layers they share."""
        bwrap, _ = bwrap_status()
        python, prefix = interpreter()
        extra = python_path(config)
        if bwrap:
            argv = [bwrap, *bwrap_flags(os.getuid() == 0), *bwrap_mounts(self.work_root, extra), "--", python, "-S", "-B",
                    f"{SANDBOX_WORKER_DIR}/worker.py", "--zygote"]  # fmt: skip
            self.inner_root, self.read_paths = (
                SANDBOX_WORK_DIR,
                [prefix, "/usr", SANDBOX_WORKER_DIR],
            )
        else:
            argv = [python, "-S", "-B", os.path.join(WORKER_DIR, "worker.py"), "--zygote"]
            self.inner_root, self.read_paths = self.work_root, [prefix, "/usr", WORKER_DIR]
        self.python_path = inner_paths(extra, bwrap)
        self.read_paths = [*self.read_paths, *self.python_path]
        self.layers = dict(host_layers)
        if bwrap:
            self.layers["namespaces"] += "; shared by the workers of one pool"
        return argv

    def _send(self, message: dict, fds: list[int] | None = None) -> None:
        with self._send_lock:
            try:
                socket.send_fds(self.sock, [json.dumps(message).encode()], fds or [])
            except OSError:
                pass  # the reader sees the zygote's end and marks it dead

    def _read_events(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self.alive = False
                    self._cond.notify_all()
                    return
                event = json.loads(data)
                if event["event"] == "ready":
                    self._ready = True
                elif event["event"] == "forked":
                    self._forked[event["id"]] = event["pid"]
                elif event["event"] == "exit":
                    self._exits[event["pid"]] = event["status"]
                    self.cpu_s[event["pid"]] = float(event.get("cpu_s", 0.0))
                self._cond.notify_all()

    def fork_worker(self) -> ZygoteWorker:
        """A fresh worker, forked and initialised; raises `InfrastructureError`."""
        n = next(self._ids)
        host_dir = os.path.join(self.work_root, str(n))
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # Each worker gets its own stderr file: siblings must not read what another wrote.
        stderr_file = tempfile.TemporaryFile()
        try:
            self._send(
                {"op": "fork", "id": n, "work_dir": os.path.join(self.inner_root, str(n))},
                [req_r, rep_w, stderr_file.fileno()],
            )
        finally:
            os.close(req_r)
            os.close(rep_w)
        with self._cond:
            self._cond.wait_for(
                lambda: n in self._forked or not self.alive, self.config.start_timeout_s
            )
            pid = self._forked.pop(n, None)
        if pid is None:
            os.close(req_w)
            os.close(rep_r)
            stderr_file.close()
            shutil.rmtree(host_dir, ignore_errors=True)
            raise InfrastructureError("the sandbox zygote did not fork a worker")
        worker = ZygoteWorker(self, pid, req_w, rep_r, host_dir, stderr_file)
        worker.layers = {
            **self.layers,
            **send_init(
                worker,
                self.config,
                os.path.join(self.inner_root, str(n)),
                self.read_paths,
                self.python_path,
            ),
        }
        return worker

    def kill(self, pid: int) -> None:
        self._send({"op": "kill", "pid": pid})

    def wait_exit(self, pid: int, timeout_s: float) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or not self.alive, timeout_s)
            if pid in self._exits:
                return self._exits.pop(pid)
            return None if self.alive else -signal.SIGKILL  # children die with the zygote

    def close(self) -> None:
        """Kill every worker of this zygote and the zygote itself; reap; remove the work dirs."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(5)
        self.sock.close()
        self.stderr_file.close()
        shutil.rmtree(self.work_root, ignore_errors=True)


class ZygoteWorker(FramedWorker):
    """A worker forked by a `Zygote`; killed and reaped through it."""

    def __init__(
        self, zygote: Zygote, pid: int, request_fd: int, reply_fd: int, work_dir: str, stderr_file
    ) -> None:
        super().__init__(request_fd, reply_fd, work_dir)
        self.zygote = zygote
        self.pid = pid
        self.stderr_file = stderr_file

    def _stderr_tail(self) -> str:
        return _tail(self.stderr_file)

    def _kill(self) -> None:
        self.zygote.kill(self.pid)

    def _reap(self, timeout_s: float) -> int | None:
        if not hasattr(self, "_status"):
            status = self.zygote.wait_exit(self.pid, timeout_s)
            if status is None:
                return None
            self._status = status
        return self._status

    def _cpu_seconds(self) -> float | None:
        return self.zygote.cpu_s.get(self.pid)

    def _disk_path(self) -> str | None:
        return self.work_dir

    def _death_error(self, op: object) -> SandboxError:
        error = super()._death_error(op)
        if not self.zygote.alive:  # the fork server died and took its workers with it
            return InfrastructureError(
                f"the pool's fork server died during {op}; its workers died with it"
            )
        return error

    def _cleanup(self) -> None:
        super()._cleanup()
        self.stderr_file.close()
        self.zygote.cpu_s.pop(self.pid, None)
        shutil.rmtree(self.work_dir, ignore_errors=True)
