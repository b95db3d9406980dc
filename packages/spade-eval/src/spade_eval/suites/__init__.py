"""Suites: each module has ``load(config) -> list[Item]`` and ``score(item, response) -> Score``.

Suites are registered by name; `get_suite` returns the module. A suite may also define
``play(client, config, done_ids) -> Iterator[list[dict]]`` for multi-turn items (procedural games).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import EvalConfigError, EvalDataError

SUITE_NAMES: tuple[str, ...] = ("math", "science", "code", "procedural", "tool_use")


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


def get_suite(name: str) -> ModuleType:
    """The suite module registered as ``name``."""
    if name not in SUITE_NAMES:
        raise EvalConfigError(f"unknown suite {name!r}; choose from {', '.join(SUITE_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")


def suite_config(defaults: dict[str, Any], config: dict[str, Any], suite: str) -> dict[str, Any]:
    """``defaults`` overlaid with ``config``; unknown keys are refused with the key named."""
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise EvalConfigError(
            f"suite {suite!r}: unknown config key {unknown[0]!r}; known: {', '.join(sorted(defaults))}"
        )
    return {**defaults, **config}


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
