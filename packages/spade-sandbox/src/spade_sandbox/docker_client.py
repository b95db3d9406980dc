"""The Docker engine side of the Docker backend: the SDK, a pinged client, and the cleanup of
worker containers whose host process died (found by their owner label)."""

from __future__ import annotations

import os
import socket
from typing import Any

from .errors import InfrastructureError

LABEL = "spade-sandbox.worker"
"""Label on every container this backend creates; its value is `owner_label()` of its host process."""
ENGINE_HINT = (
    "start an engine (here: dockerd --bridge=none --iptables=false) or point DOCKER_HOST at one"
)


def _docker_sdk():
    try:
        import docker
    except ImportError:
        raise InfrastructureError(
            "the Docker backend needs the docker SDK; install it with: pip install 'spade-sandbox[docker]'"
        ) from None
    return docker


def _connect() -> Any:
    """A docker SDK client of the engine that DOCKER_HOST (or the default socket) names, pinged."""
    docker = _docker_sdk()
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # the SDK raises DockerException or requests' errors
        raise InfrastructureError(
            f"cannot reach a Docker engine ({_first_line(exc)}); {ENGINE_HINT}"
        ) from None
    return client


def owner_label() -> str:
    """`hostname:pid` of this process, the value of `LABEL` on the containers it starts."""
    return f"{socket.gethostname()}:{os.getpid()}"


def remove_leftover_containers(all_processes: bool = False) -> int:
    """Remove worker containers whose host process died (on this machine); returns how many.

    The backend also does this once when it first connects. `all_processes=True` removes
    every container carrying `LABEL`, also those of live processes and other machines."""
    client = _connect()
    try:
        return _remove_orphans(client, all_processes)
    finally:
        client.close()


def _remove_orphans(client: Any, all_processes: bool) -> int:
    docker = _docker_sdk()
    host = socket.gethostname()
    removed = 0
    try:
        found = client.api.containers(all=True, filters={"label": LABEL})
    except (docker.errors.APIError, OSError):
        return 0
    for entry in found:
        owner_host, _, owner_pid = entry.get("Labels", {}).get(LABEL, "").rpartition(":")
        if not all_processes and (
            owner_host != host or not owner_pid.isdigit() or _pid_alive(int(owner_pid))
        ):
            continue
        try:
            client.api.remove_container(entry["Id"], force=True)
            removed += 1
        except (docker.errors.APIError, OSError):
            pass
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
