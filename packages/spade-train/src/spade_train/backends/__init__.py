"""Policy backends: see :mod:`spade_train.backends.base` for the interface."""

from spade_train.backends.base import (
    BackendError,
    PolicyBackend,
    available_backends,
    make_backend,
    register_backend,
    submit_train_step,
)

__all__ = [
    "BackendError",
    "PolicyBackend",
    "available_backends",
    "make_backend",
    "register_backend",
    "submit_train_step",
]
