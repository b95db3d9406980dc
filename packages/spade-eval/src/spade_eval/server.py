"""Start an inference server for a checkpoint, wait until it answers, stop it afterwards.

SGLang (``python -m sglang.launch_server``) where a GPU and sglang are present; otherwise the
transformers server of `spade_eval.serve`. Both speak the OpenAI chat API on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import httpx

from .errors import EvalConfigError, ModelError

SERVERS = ("auto", "sglang", "transformers")


def gpu_present() -> bool:
    """True when torch sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(kind: str, ckpt: str, port: int, *, tp: int = 1,
                   mem_fraction: float = 0.7) -> tuple[str, list[str]]:  # fmt: skip
    """``(kind actually used, command)``; ``auto`` picks sglang when a GPU and sglang exist."""
    if kind not in SERVERS:
        raise EvalConfigError(f"unknown --server {kind!r}; choose from {', '.join(SERVERS)}")
    if kind == "auto":
        kind = "sglang" if gpu_present() and find_spec("sglang") else "transformers"
    if kind == "sglang":
        if not find_spec("sglang"):
            raise EvalConfigError("--server sglang needs sglang installed (pip install sglang)")
        return kind, [sys.executable, "-m", "sglang.launch_server", "--model-path", ckpt,
                      "--served-model-name", ckpt, "--host", "127.0.0.1", "--port", str(port),
                      "--tp", str(tp), "--mem-fraction-static", str(mem_fraction)]  # fmt: skip
    return kind, [sys.executable, "-m", "spade_eval.serve", "--model", ckpt,
                  "--served-model-name", ckpt, "--port", str(port)]  # fmt: skip


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def launched(cmd: list[str], port: int, log_path: Path,
             startup_timeout_s: float = 600.0) -> Iterator[str]:  # fmt: skip
    """Run ``cmd`` in its own process group, yield its base URL once ``/v1/models`` answers,
    and stop the whole group on exit (also on errors)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                raise ModelError(
                    f"the server exited with {proc.returncode} before answering; see {log_path}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise ModelError(
                    f"the server did not answer within {startup_timeout_s:.0f} s; see {log_path}"
                )
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc)
