"""Limits and configuration of a sandbox: frozen, typed, strict (unknown keys are rejected).

`Limits` holds the per-call and per-episode resource limits; `SandboxConfig` picks the
backend, the limits, the import allow-list and which isolation layers are mandatory. Both
validate on construction, so a bad value fails where it is written, with the field named.
`SandboxConfig.from_env()` reads `SPADE_SANDBOX_*` variables (see the package README).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ALLOWED_IMPORTS: frozenset[str] = frozenset(
    {
        "__future__", "abc", "array", "bisect", "calendar", "cmath", "collections",
        "colorsys", "contextlib", "copy", "dataclasses", "datetime", "decimal", "difflib",
        "enum", "fractions", "functools", "graphlib", "hashlib", "heapq", "itertools", "json",
        "math", "numbers", "operator", "pprint", "random", "re", "statistics", "string",
        "textwrap", "time", "typing", "unicodedata",
    }
)  # fmt: skip
"""Standard-library modules games and tool-use environments need; nothing that reaches the OS.

The environment contract (`spade_envs.ALLOWED_IMPORTS`) owns this list. spade-sandbox depends
on no spade package, so it keeps this copy as its default; a spade-envs test asserts the two
are equal. Widen it per run with `SandboxConfig(allowed_imports=...)` or
`SPADE_SANDBOX_EXTRA_IMPORTS`."""

LAYERS: tuple[str, ...] = (
    "namespaces",
    "unprivileged_uid",
    "rlimits",
    "seccomp",
    "landlock",
    "import_policy",
    "scrubbed_env",
    "private_workdir",
)
"""Isolation layers a backend may report as active; `SandboxConfig.require_layers` names them."""

ENV_PREFIX = "SPADE_SANDBOX_"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed environment (units are in the field names)."""

    call_wall_s: float = 5.0
    """Wall-clock limit of one call (`reset`, `step`, `call`, opening); killed from outside."""
    episode_wall_s: float = 120.0
    """Wall-clock budget of the environment's own calls in one episode: `reset` and every
    `step`, summed. Time between calls (the agent generating its next action) does not count:
    the agent's time is bounded by the episode runner, and charged to the agent."""
    cpu_s: int = 10
    """CPU seconds for the worker's whole life (RLIMIT_CPU)."""
    mem_mib: int = 512
    """Address-space limit of the worker (RLIMIT_AS)."""
    max_procs: int = 16
    """Processes and threads (RLIMIT_NPROC; new processes are refused anyway). The kernel counts
    every task of the uid: started as root, each worker drops to uid 65534, so the workers of
    every sandbox on the machine share this count."""
    max_file_mib: int = 16
    """Largest file the environment may write (RLIMIT_FSIZE)."""
    max_disk_mib: int = 64
    """Bytes the work directory may hold in all (the disk quota; reason `disk_quota`)."""
    max_disk_files: int = 2000
    """Files and directories (inodes) the work directory may hold (the disk quota)."""
    max_open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    max_output_kib: int = 256
    """Largest observation, call result or captured stdout/stderr of one call."""
    max_steps: int = 1000
    """Steps per episode; the next one raises `limit_exceeded`."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"Limits.{f.name} must be a number, got {value!r}")
                if not math.isfinite(value) or value <= 0:
                    raise ValueError(
                        f"Limits.{f.name} must be a positive finite number, got {value!r}"
                    )
                object.__setattr__(self, f.name, float(value))
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"Limits.{f.name} must be an integer, got {value!r}")
                if value <= 0:
                    raise ValueError(f"Limits.{f.name} must be positive, got {value!r}")
        if self.max_open_files < 16:
            raise ValueError(
                "Limits.max_open_files must be at least 16 (the interpreter needs some)"
            )
        if self.mem_mib < 64:
            raise ValueError("Limits.mem_mib must be at least 64 (the interpreter needs some)")

    @property
    def max_output_bytes(self) -> int:
        return self.max_output_kib * 1024

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SandboxConfig:
    """Everything that decides how environments are sandboxed; one value per run."""

    backend: str = "process"
    """Registered backend name: "process" (default) or "docker"."""
    limits: Limits = field(default_factory=Limits)
    allowed_imports: frozenset[str] = DEFAULT_ALLOWED_IMPORTS
    """Top-level modules the environment source may import."""
    require_layers: frozenset[str] = frozenset()
    """Layers that must be active; a missing one is an `infrastructure` error, not a warning."""
    start_timeout_s: float = 10.0
    """How long a worker may take to start and apply its isolation."""
    recycle_after_episodes: int = 100
    """A `SandboxedEnv` moves to a fresh worker after this many episodes (0: never)."""
    work_root: str | None = None
    """Directory for the private per-worker work directories (default: the system temp dir)."""
    backend_options: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Backend-specific settings (for example the Docker image); read by that backend only."""

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError(f"SandboxConfig.backend must be a backend name, got {self.backend!r}")
        if not isinstance(self.limits, Limits):
            raise TypeError(
                f"SandboxConfig.limits must be a Limits, got {type(self.limits).__name__}"
            )
        object.__setattr__(self, "allowed_imports", _names("allowed_imports", self.allowed_imports))
        layers = _names("require_layers", self.require_layers)
        unknown = sorted(layers - set(LAYERS))
        if unknown:
            raise ValueError(
                f"SandboxConfig.require_layers has unknown layer(s) {unknown}; known: {', '.join(LAYERS)}"
            )
        object.__setattr__(self, "require_layers", layers)
        if (
            isinstance(self.start_timeout_s, bool)
            or not isinstance(self.start_timeout_s, (int, float))
            or not (0 < self.start_timeout_s < math.inf)
        ):
            raise ValueError(
                f"SandboxConfig.start_timeout_s must be a positive number, got {self.start_timeout_s!r}"
            )
        if (
            isinstance(self.recycle_after_episodes, bool)
            or not isinstance(self.recycle_after_episodes, int)
            or (self.recycle_after_episodes < 0)
        ):
            raise ValueError(
                f"SandboxConfig.recycle_after_episodes must be an integer >= 0, got {self.recycle_after_episodes!r}"
            )
        if self.work_root is not None and not isinstance(self.work_root, str):
            raise TypeError(
                f"SandboxConfig.work_root must be a path string or None, got {self.work_root!r}"
            )
        if not isinstance(self.backend_options, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.backend_options.items()
        ):
            raise TypeError("SandboxConfig.backend_options must map option names to string values")
        object.__setattr__(self, "backend_options", dict(self.backend_options))

    def replace(self, **changes: Any) -> SandboxConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SandboxConfig:
        """Build from plain data (a recipe file); unknown keys, also inside `limits`, are errors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown sandbox config key(s) {unknown}; known: {', '.join(sorted(known))}"
            )
        values = dict(data)
        if isinstance(values.get("limits"), Mapping):
            limit_names = {f.name for f in dataclasses.fields(Limits)}
            bad = sorted(set(values["limits"]) - limit_names)
            if bad:
                raise ValueError(
                    f"unknown limit key(s) {bad}; known: {', '.join(sorted(limit_names))}"
                )
            values["limits"] = Limits(**values["limits"])
        return cls(**values)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SandboxConfig:
        """Read `SPADE_SANDBOX_*` variables over the defaults; an unknown variable is an error.

        `SPADE_SANDBOX_BACKEND`, one variable per `Limits` field (`SPADE_SANDBOX_MEM_MIB=256`),
        `SPADE_SANDBOX_ALLOWED_IMPORTS` (comma list, replaces the default),
        `SPADE_SANDBOX_EXTRA_IMPORTS` (comma list, added), `SPADE_SANDBOX_REQUIRE_LAYERS`
        (comma list, or `all`), `SPADE_SANDBOX_START_TIMEOUT_S`,
        `SPADE_SANDBOX_RECYCLE_AFTER_EPISODES`, `SPADE_SANDBOX_WORK_ROOT`,
        `SPADE_SANDBOX_OPT_<NAME>` for backend options, and `SPADE_SANDBOX_BWRAP` (checked
        here, read by the process backend: see `bwrap_wanted`).
        """
        environ = os.environ if environ is None else environ
        limit_fields = {f.name: f.type for f in dataclasses.fields(Limits)}
        limits: dict[str, Any] = {}
        values: dict[str, Any] = {}
        options: dict[str, str] = {}
        extra: frozenset[str] = frozenset()
        for key, raw in environ.items():
            if not key.startswith(ENV_PREFIX):
                continue
            name = key[len(ENV_PREFIX) :].lower()
            if name in limit_fields:
                limits[name] = _parse_number(key, raw, str(limit_fields[name]))
            elif name == "backend":
                values["backend"] = raw.strip()
            elif name == "allowed_imports":
                values["allowed_imports"] = _comma_list(raw)
            elif name == "extra_imports":
                extra = _comma_list(raw)
            elif name == "require_layers":
                values["require_layers"] = (
                    frozenset(LAYERS) if raw.strip() == "all" else _comma_list(raw)
                )
            elif name == "start_timeout_s":
                values["start_timeout_s"] = _parse_number(key, raw, "float")
            elif name == "recycle_after_episodes":
                values["recycle_after_episodes"] = _parse_number(key, raw, "int")
            elif name == "work_root":
                values["work_root"] = raw
            elif key == BWRAP_VARIABLE:
                bwrap_wanted({key: raw})  # read by the process backend; checked here
            elif name.startswith("opt_") and len(name) > 4:
                options[name[4:]] = raw
            else:
                raise ValueError(
                    f"unknown environment variable {key}; see the spade-sandbox README for the known ones"
                )
        if extra:
            values["allowed_imports"] = (
                values.get("allowed_imports", DEFAULT_ALLOWED_IMPORTS) | extra
            )
        return cls(limits=Limits(**limits), backend_options=options, **values)


BWRAP_VARIABLE = "SPADE_SANDBOX_BWRAP"


def bwrap_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the process backend may use bubblewrap, from `SPADE_SANDBOX_BWRAP`: ``auto``
    (the default: wherever it is installed and works) or ``off`` (never, as on a machine
    without it; CI runs the sandbox tests a second time this way). Another value is a
    ValueError naming the variable."""
    environ = os.environ if environ is None else environ
    raw = environ.get(BWRAP_VARIABLE, "auto").strip().lower()
    if raw not in ("auto", "off"):
        raise ValueError(f"{BWRAP_VARIABLE}={raw!r} is not 'auto' or 'off'")
    return raw == "auto"


def _names(what: str, value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"SandboxConfig.{what} must be a collection of names, got {value!r}")
    return frozenset(value)


def _comma_list(raw: str) -> frozenset[str]:
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _parse_number(key: str, raw: str, kind: str) -> int | float:
    try:
        return float(raw) if kind == "float" else int(raw)
    except ValueError:
        word = "a number" if kind == "float" else "an integer"
        raise ValueError(f"{key}={raw!r} is not {word}") from None
