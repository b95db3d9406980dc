"""Start an inference server for a checkpoint, wait until it answers, stop it afterwards.

SGLang (``python -m sglang.launch_server``) where a GPU and sglang are present; otherwise
``transformers serve`` (transformers' own OpenAI-compatible server, extra ``hf``), pinned to the
checkpoint directory and offline. Both listen on 127.0.0.1 and name the model by the checkpoint
path as given: requests must send that name (``transformers serve`` refuses any other).

``transformers serve`` differs from the server spade-eval used to ship in three ways a caller
can meet: a request field outside the OpenAI schema (vLLM's ``stop_token_ids``,
``skip_special_tokens``) is refused with 422 instead of ignored; ``/v1/completions`` takes
``prompt`` as one string only (a list is refused with 400); and it tokenizes a raw prompt with
the tokenizer's special tokens, so a tokenizer that adds a BOS token gets one in front of the
prompt (Qwen tokenizers add none).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import httpx

from .errors import EvalConfigError, ModelError

SERVERS = ("auto", "sglang", "transformers")
# The local checkpoint is all the server needs: no Hub look-ups, no telemetry, and no check
# for a newer transformers on PyPI (the ``transformers`` CLI makes one at start otherwise).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}  # fmt: skip


@dataclass(frozen=True)
class ServerCommand:
    """How to start a server: the kind actually used, its argv, and the variables it adds to
    the environment it inherits."""

    kind: str
    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)


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
                   mem_fraction: float = 0.7) -> ServerCommand:  # fmt: skip
    """The command serving ``ckpt`` on ``port``; ``auto`` picks sglang when a GPU and sglang
    exist, else transformers."""
    if kind not in SERVERS:
        raise EvalConfigError(f"unknown --server {kind!r}; choose from {', '.join(SERVERS)}")
    if kind == "auto":
        kind = "sglang" if gpu_present() and find_spec("sglang") else "transformers"
    if kind == "sglang":
        if not find_spec("sglang"):
            raise EvalConfigError("--server sglang needs sglang installed (pip install sglang)")
        return ServerCommand(kind, [sys.executable, "-m", "sglang.launch_server", "--model-path",
                                    ckpt, "--served-model-name", ckpt, "--host", "127.0.0.1",
                                    "--port", str(port), "--tp", str(tp),
                                    "--mem-fraction-static", str(mem_fraction)])  # fmt: skip
    if not find_spec("fastapi") or not find_spec("uvicorn"):
        raise EvalConfigError("--server transformers needs pip install 'spade-eval[hf]'")
    # FORCE_MODEL pins the server to the directory: it is loaded at start, listed alone by
    # /v1/models under this very string, and requests naming another model are refused.
    # Continuous batching lets concurrent requests share forward passes (CPU included).
    return ServerCommand(kind, [sys.executable, "-m", "transformers.cli.transformers", "serve",
                                ckpt, "--host", "127.0.0.1", "--port", str(port),
                                "--continuous-batching"], OFFLINE_ENV)  # fmt: skip


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
def launched(cmd: ServerCommand, port: int, log_path: Path,
             startup_timeout_s: float = 600.0) -> Iterator[str]:  # fmt: skip
    """Run ``cmd`` in its own process group, yield its base URL once ``/v1/models`` answers,
    and stop the whole group on exit (also on errors)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd.argv, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **cmd.env}, start_new_session=True)  # fmt: skip
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
