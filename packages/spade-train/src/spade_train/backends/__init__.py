"""Policy backends: :mod:`spade_train.backends.base` is the interface,
:mod:`spade_train.backends.registry` makes them by name (the built-ins are registered by
:mod:`spade_train.backends.builtin` when this package is imported),
:mod:`spade_train.backends.options` holds each backend's typed options."""

from spade_train.backends import builtin as _builtin  # noqa: F401  (registers the built-ins)
from spade_train.backends.base import PolicyBackend, submit_train_step
from spade_train.backends.options import BackendOptions
from spade_train.backends.registry import (
    BACKENDS,
    BackendSpec,
    available_backends,
    backend_spec,
    make_backend,
    register_backend,
)
from spade_train.errors import BackendError

__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendOptions",
    "BackendSpec",
    "PolicyBackend",
    "available_backends",
    "backend_spec",
    "make_backend",
    "register_backend",
    "submit_train_step",
]
