"""The Docker backend: each worker is one locked-down container running worker.py.

A worker here is a container of the image built by `docker/build-image.sh` (a minimal
Debian with python3; default tag `spade-sandbox:py3`), created through the docker SDK with
no network, a read-only root, tmpfs at /work and /tmp, memory/CPU/pids limits, all
capabilities dropped, `no-new-privileges`, the allow-list seccomp profile below, and user
65534. It runs the same worker.py as the process backend, which applies its own layers
inside (Landlock, rlimits, its seccomp filter) on top of the container's. The worker
source travels in the container's command line rather than a bind mount, so nothing of the
host's filesystem is visible inside and a remote engine (DOCKER_HOST) works the same.

The wire protocol runs over the container's stdin/stdout through the engine's attach
socket. The engine multiplexes stdout and stderr on that socket (8-byte headers), so a
small thread per worker splits them: stdout goes into a pipe that the shared
`FramedWorker` reads with deadlines, stderr into a short tail kept for error messages.
Deadlines are enforced from outside by killing the container; every container is removed
when its worker closes. A container whose host process died gets EOF on stdin
(`stdin_once`) and exits unless it is busy; the backend removes such orphans (busy or not)
when it first connects, and `remove_leftover_containers()` does it on demand.

Backend options (`SandboxConfig.backend_options`, or `SPADE_SANDBOX_OPT_<NAME>`):
  image          the image to run (default `spade-sandbox:py3`)
  cpus           CPU share of one container, a number (default 1)
  work_mib       size of the /work tmpfs in MiB (default 64)
  worker_layers  in-worker layers to apply, comma list or `none`
                 (default `unprivileged_uid,landlock,rlimits,seccomp`; for tests that show
                 the container's own limits hold without them)
"""

from __future__ import annotations

import functools
import json
import logging
import os
import select
import signal
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .docker_client import (  # noqa: F401  (LABEL and the cleanup are re-exported)
    ENGINE_HINT,
    LABEL,
    _connect,
    _docker_sdk,
    _first_line,
    _remove_orphans,
    owner_label,
    remove_leftover_containers,
)
from .errors import InfrastructureError, SandboxError, SandboxMemoryError
from .limits import SandboxConfig
from .process import NOBODY, SCRUBBED_ENV, WORKER_DIR, WORKER_MODULES
from .protocol import FramedWorker

log = logging.getLogger("spade_sandbox")

DEFAULT_IMAGE = "spade-sandbox:py3"
SANDBOX_WORKER_DIR = "/opt/spade_sandbox"
SANDBOX_WORK_DIR = "/work"
TMP_MIB = 16
MAX_ARG_BYTES = 128 * 1024  # Linux's MAX_ARG_STRLEN: the longest single argv string
CONTAINER_ENV = {**SCRUBBED_ENV, "HOME": SANDBOX_WORK_DIR}
"""The container's variables; the engine adds only HOSTNAME (and would add HOME if unset)."""
IN_WORKER_LAYERS = ("unprivileged_uid", "landlock", "rlimits", "seccomp")
BUILD_HINT = "build it with packages/spade-sandbox/docker/build-image.sh, or name another with SPADE_SANDBOX_OPT_IMAGE"

# System calls the container may make; everything else fails with EPERM. Grouped by what a
# Python worker needs them for; absent on purpose: sockets, ptrace, mount and namespaces,
# keyrings, bpf, perf, io_uring, kexec/modules, clock and host settings, uid changes.
SECCOMP_ALLOWED: dict[str, str] = {
    "process lifetime": "execve exit exit_group restart_syscall arch_prctl set_tid_address "
    "set_robust_list get_robust_list rseq prctl",
    "threads and child processes (the pids limit bounds them)": "clone clone3 fork vfork wait4 waitid "
    "futex futex_waitv sched_yield sched_getaffinity gettid",
    "memory": "brk mmap munmap mprotect mremap madvise mlock munlock msync membarrier",
    "files in the work dir and the read-only root": "read write readv writev pread64 pwrite64 preadv "
    "pwritev open openat openat2 close close_range lseek fstat stat lstat newfstatat statx fstatfs "
    "statfs access faccessat faccessat2 readlink readlinkat getdents getdents64 getcwd chdir fchdir "
    "mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 ftruncate truncate fsync "
    "fdatasync fcntl flock dup dup2 dup3 pipe pipe2 ioctl umask fadvise64 copy_file_range sendfile",
    "file metadata (shutil.copy2 and friends; no capability, so only the sandbox's own files)": "chmod "
    "fchmod fchmodat utime utimes utimensat futimesat link linkat symlink symlinkat fallocate "
    "getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr",
    "waiting and time": "poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait "
    "epoll_pwait eventfd eventfd2 nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday "
    "time getitimer setitimer alarm timer_create timer_settime timer_gettime timer_delete",
    "signals": "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigsuspend rt_sigtimedwait sigaltstack "
    "kill tgkill tkill pause rt_sigpending",
    "identity and limits (lowering a limit needs no capability)": "getpid getppid getuid geteuid "
    "getgid getegid getresuid getresgid getgroups getpgrp getpgid getsid setsid setpgid getrlimit "
    "setrlimit prlimit64 getrusage getpriority sysinfo uname getrandom capget times getcpu",
    "the worker's own Landlock layer": "landlock_create_ruleset landlock_add_rule landlock_restrict_self",
}


def seccomp_profile() -> dict[str, Any]:
    """The container's seccomp profile (Docker's JSON format): an allow-list, EPERM otherwise."""
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": [
            {"names": sorted(names.split()), "action": "SCMP_ACT_ALLOW", "comment": purpose}
            for purpose, names in SECCOMP_ALLOWED.items()
        ],
    }


# Loads each worker module (sources in argv, in WORKER_MODULES order) as a module of its name,
# then runs the last, worker.py, as __main__.
_BOOTSTRAP = (
    "import sys, types\n"
    f"names = {list(WORKER_MODULES)!r}\n"
    "sources = dict(zip(names, sys.argv[1:]))\n"
    "for name in names[:-1]:\n"
    "    module = types.ModuleType(name)\n"
    f"    exec(compile(sources[name], '{SANDBOX_WORKER_DIR}/' + name + '.py', 'exec'), module.__dict__)\n"
    "    sys.modules[name] = module\n"
    f"sys.argv = ['{SANDBOX_WORKER_DIR}/worker.py']\n"
    f"exec(compile(sources['worker'], '{SANDBOX_WORKER_DIR}/worker.py', 'exec'),"
    " {'__name__': '__main__', '__package__': None, '__builtins__': __builtins__})\n"
)


@dataclass(frozen=True)
class DockerOptions:
    """The Docker backend's settings, parsed from `SandboxConfig.backend_options`."""

    image: str = DEFAULT_IMAGE
    cpus: float = 1.0
    work_mib: int = 64
    worker_layers: tuple[str, ...] = IN_WORKER_LAYERS

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> DockerOptions:
        known = {"image", "cpus", "work_mib", "worker_layers"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"unknown Docker backend option(s) {unknown}; known: {', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        if "image" in options:
            if not options["image"].strip():
                raise ValueError(
                    "Docker backend option image must name an image, got an empty string"
                )
            values["image"] = options["image"].strip()
        if "cpus" in options:
            try:
                values["cpus"] = float(options["cpus"])
            except ValueError:
                raise ValueError(
                    f"Docker backend option cpus={options['cpus']!r} is not a number"
                ) from None
            if not 0.01 <= values["cpus"] <= 1024:
                raise ValueError(
                    f"Docker backend option cpus must be between 0.01 and 1024, got {options['cpus']}"
                )
        if "work_mib" in options:
            try:
                values["work_mib"] = int(options["work_mib"])
            except ValueError:
                raise ValueError(
                    f"Docker backend option work_mib={options['work_mib']!r} is not an integer"
                ) from None
            if values["work_mib"] < 1:
                raise ValueError(
                    f"Docker backend option work_mib must be at least 1, got {values['work_mib']}"
                )
        if "worker_layers" in options:
            raw = options["worker_layers"].strip()
            layers = () if raw == "none" else tuple(p.strip() for p in raw.split(",") if p.strip())
            bad = sorted(set(layers) - set(IN_WORKER_LAYERS))
            if bad:
                raise ValueError(
                    f"Docker backend option worker_layers has unknown layer(s) {bad}; "
                    f"known: {', '.join(IN_WORKER_LAYERS)}, or none"
                )
            values["worker_layers"] = layers
        return cls(**values)


class DockerWorker(FramedWorker):
    """One worker container: requests go to its stdin through the attach socket; a thread
    moves its demultiplexed stdout into `reply_fd` and keeps the tail of its stderr."""

    def __init__(self, container: Any, attach: Any) -> None:
        self.container = container
        self._attach = attach  # keeps the SDK's response object (and so the socket) alive
        self._sock: socket.socket = attach._sock
        reply_fd, self._pump_fd = os.pipe()
        # A duplicate, so FramedWorker's os.close() never closes the socket object's fd.
        super().__init__(
            os.dup(self._sock.fileno()),
            reply_fd,
            f"container {container.short_id}:{SANDBOX_WORK_DIR}",
        )
        self._stderr = bytearray()
        self._status: int | None = None
        self._removed = False
        self._pump = threading.Thread(
            target=self._demultiplex, name=f"spade-docker-{container.short_id}", daemon=True
        )
        self._pump.start()

    def _demultiplex(self) -> None:
        buf = bytearray()
        try:
            while True:
                select.select([self._sock], [], [])  # FramedWorker made the fd non-blocking
                try:
                    chunk = self._sock.recv(1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                buf += chunk
                # Engine frames: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4-byte length.
                while len(buf) >= 8:
                    size = int.from_bytes(buf[4:8], "big")
                    if len(buf) < 8 + size:
                        break
                    stream, payload = buf[0], bytes(buf[8 : 8 + size])
                    del buf[: 8 + size]
                    if stream == 1:
                        _write_blocking(self._pump_fd, payload)
                    else:
                        self._stderr += payload
                        del self._stderr[:-4000]
        except OSError:
            return  # the socket was shut down, or the host closed its end of the pipe
        finally:
            os.close(self._pump_fd)

    def _kill(self) -> None:
        if self._removed:
            return
        docker = _docker_sdk()
        try:
            # SIGKILL and removal in one engine call; the exit status is not needed after a kill.
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.APIError, OSError):
            return  # _cleanup tries again; remove_leftover_containers() finds it by its label
        self._removed = True
        if self._status is None:
            self._status = -signal.SIGKILL

    def _reap(self, timeout_s: float) -> int | None:
        if self._status is not None:
            return self._status
        docker = _docker_sdk()
        try:
            result = self.container.wait(timeout=max(timeout_s, 0.1))
        except (docker.errors.APIError, OSError, ValueError):
            return None  # requests' timeouts are OSErrors: still running, or the engine is gone
        code = int(result.get("StatusCode", -1))
        # The engine reports a process killed by signal N as exit status 128 + N.
        self._status = -(code - 128) if code > 128 else code
        return self._status

    def _oom_killed(self) -> bool:
        docker = _docker_sdk()
        try:
            self.container.reload()
        except (docker.errors.APIError, OSError):
            return False
        return bool(self.container.attrs.get("State", {}).get("OOMKilled"))

    def _death_error(self, op: object) -> SandboxError:
        error = super()._death_error(op)
        if self._oom_killed():
            return SandboxMemoryError(
                f"the container ran out of memory during {op} (its cgroup limit, from Limits.mem_mib)"
            )
        return error

    def _stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    def _cleanup(self) -> None:
        super()._cleanup()  # closes the pipe's read end: a blocked pump write fails and returns
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._pump.join(timeout=5)
        self._attach.close()  # the socket's fd closes only when its SocketIO wrapper closes too
        self._sock.close()
        self._kill()


def _write_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class DockerBackend:
    """Workers in locked-down containers on a Docker engine, via the docker SDK."""

    name = "docker"

    def __init__(self) -> None:
        self._client: Any = None
        self._images_seen: set[str] = set()
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The engine client, connected and pinged on first use; `InfrastructureError` if unreachable.

        The SDK keeps an idle connection per recently used request URL (at most 25 pools;
        every container has its own URLs), so up to about 25 sockets to the engine stay
        open while the backend is in use; `client().close()` releases them."""
        with self._lock:
            if self._client is None:
                client = _connect()
                self._client = client
                removed = _remove_orphans(client, all_processes=False)
                if removed:
                    log.info(
                        "spade-sandbox: removed %d worker container(s) left by host processes that died",
                        removed,
                    )
            return self._client

    def _require_image(self, image: str) -> None:
        if image in self._images_seen:
            return
        docker = _docker_sdk()
        try:
            self.client().images.get(image)
        except docker.errors.ImageNotFound:
            raise InfrastructureError(
                f"the Docker image {image!r} is not there; {BUILD_HINT}"
            ) from None
        except docker.errors.APIError as exc:
            raise InfrastructureError(
                f"cannot look up the Docker image {image!r}: {_first_line(exc)}"
            ) from None
        self._images_seen.add(image)

    def host_layers(self, config: SandboxConfig) -> dict[str, str]:
        options = DockerOptions.from_options(config.backend_options)
        limits = config.limits
        return {
            "namespaces": "active: Docker container (pid, mount, ipc, uts namespaces; network none; "
            "read-only root; all capabilities dropped; no-new-privileges)",
            "scrubbed_env": "active: only "
            + ", ".join(sorted(CONTAINER_ENV | {"HOSTNAME": "sandbox"})),
            "private_workdir": f"active: a fresh {options.work_mib} MiB tmpfs at {SANDBOX_WORK_DIR} per container",
            "cgroup_limits": f"active: memory {_memory_mib(config, options)} MiB (no swap), "
            f"pids {limits.max_procs}, cpus {options.cpus:g}",
        }

    def start(self, config: SandboxConfig) -> DockerWorker:
        try:
            options = DockerOptions.from_options(config.backend_options)
        except ValueError as exc:
            raise InfrastructureError(str(exc)) from None
        docker = _docker_sdk()
        self._require_image(options.image)
        container = self._create_container(config, options)
        try:
            attach = container.attach_socket(
                params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            worker = DockerWorker(container, attach)
        except Exception as exc:
            container.remove(force=True)
            raise InfrastructureError(
                f"could not attach to the worker container: {_first_line(exc)}"
            ) from None
        try:
            container.start()
        except docker.errors.APIError as exc:
            worker.close()
            raise InfrastructureError(
                f"the worker container did not start: {_first_line(exc)}"
            ) from None
        init = {
            "op": "init",
            "limits": config.limits.to_dict(),
            "allowed_imports": sorted(config.allowed_imports),
            "work_dir": SANDBOX_WORK_DIR,
            "read_paths": ["/usr"],
            "apply": list(options.worker_layers),
        }
        try:
            value = worker.request(init, config.start_timeout_s, 64 * 1024)
        except SandboxError as exc:
            worker.close()
            raise InfrastructureError(
                f"the worker container failed to start ({exc.reason.value}: {exc.message})"
            ) from None
        worker.layers = _merge_layers(self.host_layers(config), value["layers"])  # type: ignore[index]
        return worker

    def _create_container(self, config: SandboxConfig, options: DockerOptions) -> Any:
        """A created, not yet started, worker container: locked down, with its limits."""
        docker = _docker_sdk()
        limits = config.limits
        memory = f"{_memory_mib(config, options)}m"
        tmpfs_flags = f"rw,nosuid,nodev,noexec,uid={NOBODY},gid={NOBODY},mode=0700"
        sources = _worker_sources()
        try:
            return self.client().containers.create(
                options.image,
                ["python3", "-S", "-B", "-c", _BOOTSTRAP, *sources],
                user=f"{NOBODY}:{NOBODY}",
                environment=dict(CONTAINER_ENV),
                working_dir=SANDBOX_WORK_DIR,
                hostname="sandbox",
                labels={LABEL: owner_label()},
                stdin_open=True,  # the SDK sets StdinOnce with it: stdin closes when we detach
                network_mode="none",
                ipc_mode="none",
                read_only=True,
                tmpfs={
                    SANDBOX_WORK_DIR: f"{tmpfs_flags},size={min(options.work_mib, config.limits.max_disk_mib)}m,"
                    f"nr_inodes={config.limits.max_disk_files}",
                    "/tmp": f"{tmpfs_flags},size={TMP_MIB}m",
                },
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(options.cpus * 1e9),
                pids_limit=limits.max_procs,
                oom_score_adj=1000,  # under host memory pressure the kernel kills sandboxes first
                cap_drop=["ALL"],
                security_opt=["no-new-privileges", "seccomp=" + json.dumps(seccomp_profile())],
                # No log driver: a flood on stderr must not fill the engine's disk.
                log_config=docker.types.LogConfig(type="none"),
            )
        except docker.errors.APIError as exc:
            raise InfrastructureError(
                f"the Docker engine refused to create a worker container: {_first_line(exc)}"
            ) from None


@functools.lru_cache(maxsize=1)
def _worker_sources() -> tuple[str, ...]:
    """The text of each worker module (`WORKER_MODULES`), checked to fit in one command-line
    argument each."""
    sources = []
    for name in WORKER_MODULES:
        with open(os.path.join(WORKER_DIR, f"{name}.py"), encoding="utf-8") as f:
            text = f.read()
        if len(text.encode()) >= MAX_ARG_BYTES:
            raise InfrastructureError(
                f"{name}.py is {len(text.encode())} bytes, over the {MAX_ARG_BYTES} a command-line "
                "argument may hold; the Docker backend passes it to the container that way"
            )
        sources.append(text)
    return tuple(sources)


def _memory_mib(config: SandboxConfig, options: DockerOptions) -> int:
    # tmpfs pages are charged to the container's memory cgroup, so they get room on top.
    return config.limits.mem_mib + options.work_mib + TMP_MIB


def _merge_layers(host: dict[str, str], worker: dict[str, str]) -> dict[str, str]:
    layers = {**host, **worker}
    profile = f"the container's allow-list profile ({sum(len(n.split()) for n in SECCOMP_ALLOWED.values())} calls)"
    inner = worker.get("seccomp", "")
    layers["seccomp"] = f"active: {profile}" + (
        f"; worker filter {inner}" if inner.startswith("active") else ""
    )
    if not worker.get("unprivileged_uid", "").startswith("active"):
        layers["unprivileged_uid"] = f"active: container user {NOBODY}"
    return layers
