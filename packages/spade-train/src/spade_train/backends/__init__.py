"""Policy backends: see :mod:`spade_train.backends.base` for the interface and the registry,
:mod:`spade_train.backends.options` for each backend's typed options."""

from spade_train.backends.base import (
    BackendSpec,
    PolicyBackend,
    available_backends,
    backend_spec,
    make_backend,
    register_backend,
    submit_train_step,
)
from spade_train.backends.options import BackendOptions
from spade_train.errors import BackendError

__all__ = [
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
