"""What isolation is active on this machine: start one real worker and read its layers."""

from __future__ import annotations

import os
import platform
import sys

from .errors import SandboxError
from .limits import LAYERS, SandboxConfig
from .protocol import backend_names, start_worker


def doctor_layers(config: SandboxConfig | None = None) -> dict[str, str]:
    """Layer name -> state, measured by starting (and closing) one worker of `config.backend`.

    Raises `SandboxError` (or ValueError for an unknown backend) when no worker starts."""
    config = SandboxConfig.from_env() if config is None else config
    worker = start_worker(config.replace(require_layers=frozenset()))
    try:
        return dict(worker.layers)
    finally:
        worker.close()


def format_report(
    config: SandboxConfig, layers: dict[str, str] | None, failure: str | None = None
) -> str:
    """The doctor's text for measured `layers` (or the reason no worker started)."""
    lines = [
        "spade-sandbox doctor",
        f"  machine:  {platform.system()} {platform.release()} {platform.machine()}, uid {os.getuid()}",
        f"  python:   {sys.version.split()[0]} ({sys.executable})",
        f"  backends: {', '.join(backend_names())}; using {config.backend!r}",
    ]
    if layers is None:
        lines.append(f"  worker:   FAILED to start: {failure}")
        return "\n".join(lines)
    width = max(len(name) for name in LAYERS)
    active = 0
    for name in LAYERS:
        state = layers.get(name, "unavailable: not reported by this backend")
        ok = state.startswith("active")
        active += ok
        lines.append(f"  {'ok' if ok else '--'} {name:<{width}}  {state}")
    lines.append(f"  {active}/{len(LAYERS)} layers active")
    return "\n".join(lines)


def doctor_report(config: SandboxConfig | None = None) -> str:
    """A readable report: machine, backend, and every isolation layer as active or not (why)."""
    config = SandboxConfig.from_env() if config is None else config
    try:
        return format_report(config, doctor_layers(config))
    except (SandboxError, ValueError, ImportError) as exc:
        return format_report(config, None, str(exc))
