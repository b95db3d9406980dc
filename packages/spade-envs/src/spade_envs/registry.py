"""Gymnasium registration: ``gymnasium.make("spade/<env_id>")`` for corpus environments.

``register_corpus(path)`` registers every environment of a corpus under the ``spade``
namespace (or another). Importing spade_envs registers every shipped corpus under its own
namespace (:data:`SHIPPED_NAMESPACES`): the example corpus as ``spade/<id>``, the starter
corpus as ``spade-starter/<id>`` and the tool-use corpus as ``spade-tool-use/<id>``, so
``gymnasium.make("spade-starter/<id>")`` works after ``import spade_envs`` (or, without an
import, ``gymnasium.make("spade_envs:spade/<id>")``). A corpus is loaded and verified once per
path, on its first ``make``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium

from .corpus import (
    Corpus,
    example_corpus_path,
    load_corpus,
    resolve_corpus_path,
    starter_corpus_path,
    tool_use_corpus_path,
)
from .corpus_dir import is_corpus_directory, manifest_ids
from .errors import CorpusError

__all__ = ["NAMESPACE", "SHIPPED_NAMESPACES", "register_corpus", "make_corpus_env"]

NAMESPACE = "spade"

#: The Gymnasium namespace of each shipped corpus, by the corpus name the CLI accepts.
SHIPPED_NAMESPACES: dict[str, str] = {
    "example": NAMESPACE,
    "starter": "spade-starter",
    "tool_use": "spade-tool-use",
}


@lru_cache(maxsize=32)
def _cached_corpus(path: str) -> Corpus:
    return load_corpus(path)


def make_corpus_env(
    corpus_path: str, env_id: str, hint: bool = False, sandbox: bool = False, **kwargs: Any
):
    """Gymnasium entry point: the SpadeGymEnv of ``env_id`` in the corpus at ``corpus_path``."""
    return _cached_corpus(corpus_path).make(env_id, hint=hint, sandbox=sandbox, **kwargs)


def _manifest_ids(path: Path) -> list[str]:
    return manifest_ids(path) if path.is_dir() else load_corpus(path).ids()


def register_corpus(
    path: str | os.PathLike[str] = "example", *, namespace: str = NAMESPACE, overwrite: bool = True
) -> list[str]:
    """Register every environment of the corpus as ``<namespace>/<env_id>``; returns the Gymnasium ids.

    Extra keyword arguments of ``gymnasium.make`` (``hint=True``, ``max_turns=…``,
    ``sandbox=True``, ``render_mode="ansi"``) reach :meth:`Corpus.make`.
    """
    resolved = resolve_corpus_path(path).resolve()
    ids = []
    for env_id in _manifest_ids(resolved):
        gym_id = f"{namespace}/{env_id}"
        if gym_id in gymnasium.registry and not overwrite:
            raise CorpusError(
                f"{gym_id} is already registered; pass overwrite=True or another namespace"
            )
        gymnasium.registry.pop(gym_id, None)
        gymnasium.register(
            id=gym_id,
            entry_point="spade_envs.registry:make_corpus_env",
            kwargs={"corpus_path": str(resolved), "env_id": env_id},
        )
        ids.append(gym_id)
    return ids


def _register_shipped() -> None:
    """Register every shipped corpus under its namespace (one whose files are absent is skipped)."""
    paths = {
        "example": example_corpus_path(),
        "starter": starter_corpus_path(),
        "tool_use": tool_use_corpus_path(),
    }
    for name, path in paths.items():
        if is_corpus_directory(path):
            register_corpus(path, namespace=SHIPPED_NAMESPACES[name])
