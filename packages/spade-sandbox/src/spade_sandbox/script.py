"""One-off scripts in a sandbox: `run(script)` and `run_script` on a given worker."""

from __future__ import annotations

import time

from .errors import ReasonCode, SandboxError
from .limits import SandboxConfig
from .protocol import WorkerHandle, start_worker
from .result import ExecResult


def run_script(
    worker: WorkerHandle, script_source: str, config: SandboxConfig, stdin: str
) -> ExecResult:
    """Run one script in `worker` (which is closed afterwards)."""
    if not isinstance(script_source, str) or not isinstance(stdin, str):
        raise TypeError("script_source and stdin must be str")
    limits = config.limits
    started = time.monotonic()
    try:
        value = worker.request(
            {"op": "exec", "source": script_source, "stdin": stdin},
            limits.call_wall_s,
            2 * limits.max_output_bytes,
        )
    except SandboxError as exc:
        if exc.is_infrastructure:
            raise
        return ExecResult(-9, "", str(exc), time.monotonic() - started, exc.reason)
    finally:
        worker.close()
    wall_s = time.monotonic() - started
    try:
        reply: dict = value  # type: ignore[assignment]  # checked by the except below
        reason = ReasonCode(reply["reason"]) if reply["reason"] is not None else None
        return ExecResult(
            int(reply["returncode"]), str(reply["stdout"]), str(reply["stderr"]), wall_s, reason
        )
    except (KeyError, TypeError, ValueError):
        return ExecResult(
            -1, "", "the worker's exec reply is malformed", wall_s, ReasonCode.PROTOCOL_ERROR
        )


def run(script_source: str, config: SandboxConfig | None = None, stdin: str = "") -> ExecResult:
    """Run a one-off script in a fresh sandbox; what the script does is in the result
    (returncode, stdout, stderr, reason); only a sandbox fault raises (`InfrastructureError`)."""
    config = SandboxConfig.from_env() if config is None else config
    return run_script(start_worker(config), script_source, config, stdin)
