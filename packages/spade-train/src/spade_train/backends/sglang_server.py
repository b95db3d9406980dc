"""SGLang servers launched by the ray backend, one Ray actor each.

A server actor sits on the first GPU bundle of its engine's span and runs
``python -m sglang.launch_server`` (:func:`server_command`) as a child process that dies with
it, on a free port of its node, with ``--tp-size`` GPUs from ``--base-gpu-id`` on. It answers
with the server's URL once ``/health`` does. The backend restarts a server whose actor or
process died and brings it up to the last published weights. ``sglang_router`` (optional) runs
the same way on the driver's node (:func:`router_command`).

The command names flags of SGLang 0.5.23's ``ServerArgs``; the SGLang contract tests parse it
with SGLang's own argument parser.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from spade_train.backends.weight_sync import free_port, node_address, reads_marker
from spade_train.errors import BackendError


@dataclass(frozen=True)
class ServerSpec:
    """How to launch one SGLang server (the engine part of ``backend.options.sglang``)."""

    model_path: str
    tp_size: int = 1
    context_length: int | None = None
    mem_fraction_static: float = 0.7
    dtype: str = "auto"
    seed: int = 0
    deterministic: bool = True
    """``--enable-deterministic-inference``: per-request seeds are honoured (reproducible runs)."""
    memory_saver: bool = False
    """``--enable-memory-saver``: weights and KV cache can be released while colocated training runs."""
    weight_version: str = "0"
    extra_args: tuple[str, ...] = ()
    module: str = "sglang.launch_server"
    python: str = field(default_factory=lambda: sys.executable)
    start_timeout_s: float = 900.0


def server_command(spec: ServerSpec, host: str, port: int, base_gpu_id: int = 0) -> list[str]:
    """The ``python -m sglang.launch_server ...`` command line of one server."""
    cmd = [
        spec.python, "-m", spec.module,
        "--model-path", spec.model_path,
        "--host", host,
        "--port", str(port),
        "--tp-size", str(spec.tp_size),
        "--base-gpu-id", str(base_gpu_id),
        "--mem-fraction-static", str(spec.mem_fraction_static),
        "--dtype", spec.dtype,
        "--random-seed", str(spec.seed),
        "--weight-version", spec.weight_version,
        "--skip-server-warmup",
    ]  # fmt: skip
    if spec.context_length:
        cmd += ["--context-length", str(spec.context_length)]
    if spec.deterministic:
        cmd.append("--enable-deterministic-inference")
    if spec.memory_saver:
        cmd.append("--enable-memory-saver")
    return cmd + list(spec.extra_args)


def router_command(
    worker_urls: list[str], host: str, port: int, python: str | None = None
) -> list[str]:
    """The ``python -m sglang_router.launch_router`` command in front of ``worker_urls``."""
    return [
        python or sys.executable, "-m", "sglang_router.launch_router",
        "--worker-urls", *worker_urls,
        "--host", host,
        "--port", str(port),
        "--policy", "cache_aware",
    ]  # fmt: skip


def _die_with_parent() -> None:
    """In the child: receive SIGKILL when the actor process that started it dies (Linux)."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ServerProcess:
    """A server child process and its log; :meth:`wait_healthy` or a clear error."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.cmd = cmd
        self.log = Path(tempfile.mkstemp(prefix="spade-sglang-", suffix=".log")[1])
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                preexec_fn=_die_with_parent,
            )

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_healthy(self, url: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BackendError(
                    f"SGLang server exited with code {self.proc.returncode} before it was "
                    f"healthy; last log lines:\n{self.tail()}"
                )
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise BackendError(
            f"SGLang server {url} not healthy after {timeout_s:g}s; raise "
            f"backend.options.sglang.start_timeout_s; last log lines:\n{self.tail()}"
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class SGLangServerActor:
    """A Ray actor that owns one SGLang server process (see the module doc)."""

    def __init__(self, spec: ServerSpec, base_gpu_id: int, env: dict[str, str]) -> None:
        self.spec, self.env, self.base_gpu_id = spec, env, base_gpu_id
        self.host = node_address()
        self.launches = 0
        self._launch()

    def _launch(self) -> None:
        port = free_port()
        self.url_ = f"http://{self.host}:{port}"
        self.cmd = server_command(self.spec, self.host, port, self.base_gpu_id)
        self.server = ServerProcess(self.cmd, self.env)
        self.launches += 1
        self.server.wait_healthy(self.url_, self.spec.start_timeout_s)

    def url(self) -> str:
        """The server's URL; a server process that died is started again first (new port).
        A restarted actor (its node lost) has a new one too."""
        if not self.server.alive():
            self._launch()
        return self.url_

    def info(self) -> dict[str, str | int | bool]:
        """Where the server runs, and whether its process is alive."""
        return {
            "url": self.url_,
            "node": self.host,
            "base_gpu_id": self.base_gpu_id,
            "alive": self.server.alive(),
            "pid": self.server.proc.pid,
            "launches": self.launches,
        }

    def command(self) -> list[str]:
        return self.cmd

    def reads_marker(self, directory: str, token: str) -> bool:
        """Whether this node sees the trainer's marker in ``directory`` (a shared path)."""
        return reads_marker(directory, token)

    def log_tail(self, lines: int = 40) -> str:
        return self.server.tail(lines)

    def stop(self) -> None:
        self.server.stop()


class RouterActor:
    """``sglang_router`` in front of the servers (CPU only, on the driver's node)."""

    def __init__(self, worker_urls: list[str], python: str, start_timeout_s: float) -> None:
        host, port = node_address(), free_port()
        self.url_ = f"http://{host}:{port}"
        self.server = ServerProcess(router_command(worker_urls, host, port, python))
        self.server.wait_healthy(self.url_, start_timeout_s)

    def url(self) -> str:
        return self.url_

    def stop(self) -> None:
        self.server.stop()
