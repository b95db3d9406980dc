"""Starting the SGLang stand-ins for tests: the plain one (this environment) and SGLang's own
app with the stand-in engine (the SGLang test environment, scripts/sglang-test-env.sh)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).parent
STANDIN_DIR = HERE / "sglang_env"
REPO = HERE.parents[2]
SGLANG_PYTHON = Path(os.environ.get("SPADE_SGLANG_ENV", REPO / ".cache/sglang-env")) / "bin/python"
SGLANG_ENV_MISSING = (
    f"the SGLang test environment is absent ({SGLANG_PYTHON}); build it with "
    "scripts/sglang-test-env.sh"
)


def sglang_env_ready() -> bool:
    if not SGLANG_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(SGLANG_PYTHON), "-W", "ignore", "-c", "import sglang.srt.entrypoints.http_server"],
        capture_output=True, timeout=300,
    )  # fmt: skip
    return probe.returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def standin_env(delay_s: float = 0.0) -> dict[str, str]:
    """Environment variables a stand-in server process needs (its module on the path)."""
    path = os.pathsep.join([str(STANDIN_DIR), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path, "SPADE_STANDIN_TOKEN_DELAY_S": str(delay_s), "OMP_NUM_THREADS": "1"}


class Server:
    def __init__(self, cmd: list[str], port: int, env: dict[str, str]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(os.devnull, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise RuntimeError(f"stand-in server exited: {out[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("stand-in server did not become healthy")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def plain_server(
    model: str, context_length: int, delay_s: float = 0.0, version: str = "0"
) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "spade_standin_server", "--model-path", model, "--port", str(port),
           "--context-length", str(context_length), "--weight-version", version]  # fmt: skip
    return Server(cmd, port, standin_env(delay_s))


def sglang_app_server(
    model: str, context_length: int, delay_s: float = 0.0, version: str = "0"
) -> Server:
    port = free_port()
    cmd = [str(SGLANG_PYTHON), "-W", "ignore", "-m", "spade_sglang_app", "--model-path", model,
           "--port", str(port), "--context-length", str(context_length), "--weight-version", version]  # fmt: skip
    return Server(cmd, port, standin_env(delay_s))
