"""The corpora spade-envs ships, as package data: this module only says where they are."""

from pathlib import Path

ROOT = Path(__file__).parent
"""The directory holding one subdirectory per shipped corpus."""

NAMES = ("example", "starter", "tool_use")
"""The shipped corpora, by the name the ``spade-envs`` CLI accepts."""


def path(name: str) -> Path:
    """The directory of the shipped corpus ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise ValueError(f"no shipped corpus {name!r}; shipped: {', '.join(NAMES)}")
    return ROOT / name
