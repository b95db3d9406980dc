"""spade-train: the SPADE self-play loop, its recipes and policy backends (see the README).

The public names below are imported on first use, so ``import spade_train`` stays light.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version as _version
from typing import Any

__version__ = _version("spade-train")

_PUBLIC = {
    "RunConfig": "spade_train.config",
    "load_recipe": "spade_train.config",
    "list_recipes": "spade_train.config",
    "dump_config": "spade_train.config",
    "SelfPlay": "spade_train.loop",
    "start_run": "spade_train.loop",
    "resume_run": "spade_train.loop",
    "run_cycle": "spade_train.cycle",
    "Resources": "spade_train.cycle",
    "RunState": "spade_train.cycle",
    "PolicyBackend": "spade_train.backends",
    "BackendSpec": "spade_train.backends",
    "BackendOptions": "spade_train.backends",
    "make_backend": "spade_train.backends",
    "register_backend": "spade_train.backends",
    "available_backends": "spade_train.backends",
    "Generation": "spade_train.types",
    "SamplingParams": "spade_train.types",
    "TrainSample": "spade_train.types",
    "SpadeTrainError": "spade_train.errors",
    "RecipeError": "spade_train.errors",
    "BackendError": "spade_train.errors",
    "RunDirError": "spade_train.errors",
    "ModelError": "spade_train.errors",
    "RegistryError": "spade_train.errors",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'spade_train' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
