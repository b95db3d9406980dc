"""The backend registry: each backend by name, with the typed model of its own options.

A backend is a :class:`BackendSpec` in :data:`BACKENDS` (spade-envs' one registry): its
factory, called with the flat keyword options, and the pydantic model of ``backend.options``
in a recipe, checked when the recipe loads. The built-in backends are registered by
:mod:`spade_train.backends.builtin` when the package is imported; other packages register
theirs with :func:`register_backend` or through the ``spade_train.backends`` entry-point group
(an object that is a :class:`BackendSpec`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spade_envs.plugins import Registry, RegistryError

from spade_train.backends.base import PolicyBackend
from spade_train.backends.options import BackendOptions

BackendFactory = Callable[..., PolicyBackend]
ENTRY_POINT_GROUP = "spade_train.backends"


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: its name, a factory called with the flat keyword options, and the
    pydantic model of its own options (``backend.options`` in a recipe), checked at load."""

    name: str
    factory: BackendFactory
    options: type[BackendOptions]


def _spec(name: str, obj: object) -> BackendSpec:
    if not isinstance(obj, BackendSpec):
        raise RegistryError(f"entry point {name} ({ENTRY_POINT_GROUP}) is not a BackendSpec")
    return obj


BACKENDS: Registry[BackendSpec] = Registry("backend", entry_points=ENTRY_POINT_GROUP, convert=_spec)


def register_backend(spec: BackendSpec) -> None:
    """Add a backend; a name registered twice is refused (:class:`RegistryError`)."""
    BACKENDS.register(spec.name, spec)


def backend_spec(name: str) -> BackendSpec:
    """The spec registered as ``name``; :class:`RegistryError` naming the choices otherwise."""
    return BACKENDS.get(name)


def available_backends() -> list[str]:
    return sorted(BACKENDS.names())


def make_backend(name: str, **options: Any) -> PolicyBackend:
    """Create the backend registered as ``name`` with its (flat) keyword options."""
    return backend_spec(name).factory(**options)
