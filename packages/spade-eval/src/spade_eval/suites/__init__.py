"""Suites and their registry.

A suite is any object (a module is fine) with ``load(config) -> list[Item]`` and
``score(item, response) -> Score``. Optional members: ``play(complete, config, done_ids)`` for
multi-turn items (yields batches of records), ``metrics(by_item, config) -> dict[str, float]``
for flat paper keys (``aime2025_pass1``, ``gem_eval/category_rg_math/win_rate`` …) and
``data_needs(config) -> list[DataNeed]`` for ``spade-eval list``.

Built-in suites are imported on first use. Others register with `register_suite` or through
the ``spade_eval.suites`` entry-point group (``name = "pkg.module"`` or ``"pkg.module:obj"``);
a name is registered once, a second registration is refused. The registry is spade-envs' one
:class:`spade_envs.plugins.Registry`; its mistakes are :class:`spade_envs.RegistryError`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from spade_envs.plugins import Registry, RegistryError

from ..errors import EvalConfigError, EvalDataError

#: The suites that ship with spade-eval (module names under ``spade_eval.suites``).
SUITE_NAMES: tuple[str, ...] = (
    "math", "science", "code", "procedural", "tool_use", "aime", "rg_hard",
    "livecodebench", "bfcl", "acebench", "tau2",
)  # fmt: skip
ENTRY_POINT_GROUP = "spade_eval.suites"


@dataclass(frozen=True)
class Item:
    """One prompt of a suite: ``id`` unique within the suite, ``prompt`` a chat, ``answer`` gold."""

    id: str
    prompt: list[dict[str, str]]
    answer: Any
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Score:
    """Score of one response: ``value`` in [0, 1], ``extracted`` the parsed answer (or None)."""

    value: float
    extracted: str | None
    detail: str = ""


@dataclass(frozen=True)
class DataNeed:
    """One thing a suite reads: ``path`` (or a package name), whether it is ``present``, and
    ``how`` to prepare it when it is not."""

    path: str
    present: bool
    how: str


@runtime_checkable
class Suite(Protocol):
    """What the runner needs from a suite (see the module docstring for optional members)."""

    def load(self, config: dict[str, Any]) -> list[Item]: ...

    def score(self, item: Item, response: str) -> Score: ...


def check_suite(name: str, suite: Any) -> None:
    """Refuse a suite without ``load`` and ``score`` (:class:`spade_envs.RegistryError`)."""
    if not isinstance(suite, Suite):
        raise RegistryError(f"suite {name!r} needs load(config) and score(item, response)")


SUITES: Registry[Any] = Registry("suite", entry_points=ENTRY_POINT_GROUP, check=check_suite)
"""Every suite by name (spade-envs' one registry): the built-ins, imported at their first
lookup, then those registered here or through the entry-point group."""


def _builtin(name: str) -> Callable[[], Any]:
    return lambda: importlib.import_module(f"{__name__}.{name}")


for _name in SUITE_NAMES:
    SUITES.register_lazy(_name, _builtin(_name))


def register_suite(name: str, suite: Any) -> None:
    """Register ``suite`` as ``name``; a name already taken (built-in or registered) is refused
    (:class:`spade_envs.RegistryError`)."""
    SUITES.register(name, suite)


def suite_names() -> list[str]:
    """Every suite name: the built-in ones, then registered ones."""
    return SUITES.names()


def get_suite(name: str) -> Any:
    """The suite registered as ``name`` (:class:`spade_envs.RegistryError` naming the choices
    when there is none)."""
    return SUITES.get(name)


def workspace_root(suite: str) -> Path:
    """``$WORKSPACE_DIR``, or EvalDataError saying that suite ``suite`` needs it."""
    root = os.environ.get("WORKSPACE_DIR")
    if not root:
        raise EvalDataError(f"suite {suite!r} reads its data under WORKSPACE_DIR, which is not set")
    return Path(root)


def suite_config(defaults: dict[str, Any], config: dict[str, Any], suite: str) -> dict[str, Any]:
    """``defaults`` overlaid with ``config``; unknown keys are refused with the key named."""
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise EvalConfigError(
            f"suite {suite!r}: unknown config key {unknown[0]!r}; known: {', '.join(sorted(defaults))}"
        )
    return {**defaults, **config}


def workspace_needs(suite: str, names: list[str], how: str) -> list[DataNeed]:
    """`DataNeed` entries for ``$WORKSPACE_DIR/eval/<suite>/<name>`` files."""
    root = os.environ.get("WORKSPACE_DIR")
    if not root:
        return [
            DataNeed(f"$WORKSPACE_DIR/eval/{suite}/{n}", False, "set WORKSPACE_DIR") for n in names
        ]
    paths = [Path(root) / "eval" / suite / n for n in names]
    return [DataNeed(str(p), p.is_file(), how) for p in paths]


def workspace_file(suite: str, name: str, how: str) -> Path:
    """``$WORKSPACE_DIR/eval/<suite>/<name>``, or EvalDataError naming it and how to get it."""
    root = os.environ.get("WORKSPACE_DIR")
    if not root:
        raise EvalDataError(
            f"suite {suite!r} needs eval/{suite}/{name} under WORKSPACE_DIR, which is not set; "
            f"set WORKSPACE_DIR and {how}"
        )
    path = Path(root) / "eval" / suite / name
    if not path.is_file():
        raise EvalDataError(f"missing {path}; {how}")
    return path
