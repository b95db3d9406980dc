"""The built-in backends, registered when :mod:`spade_train.backends` is imported. Each is
imported only when made (torch, Ray and Tinker load slowly)."""

from __future__ import annotations

from typing import Any

from spade_train.backends.base import PolicyBackend
from spade_train.backends.options import LocalOptions, MegatronOptions, TinkerOptions
from spade_train.backends.ray_options import RayOptions
from spade_train.backends.registry import BackendSpec, register_backend


def _local(**kw: Any) -> PolicyBackend:
    from spade_train.backends.local import LocalBackend

    return LocalBackend(**kw)


def _ray(**kw: Any) -> PolicyBackend:
    from spade_train.backends.ray import RayBackend

    return RayBackend(**kw)


def _megatron(**kw: Any) -> PolicyBackend:
    from spade_train.backends.megatron import MegatronBackend

    return MegatronBackend(**kw)


def _tinker(**kw: Any) -> PolicyBackend:
    from spade_train.backends.tinker import TinkerBackend

    return TinkerBackend(**kw)


register_backend(BackendSpec("local", _local, LocalOptions))
register_backend(BackendSpec("ray", _ray, RayOptions))
register_backend(BackendSpec("megatron", _megatron, MegatronOptions))
register_backend(BackendSpec("tinker", _tinker, TinkerOptions))
