"""The policy backend interface and the backend registry.

The self-play loop talks to exactly one object implementing :class:`PolicyBackend`:

* ``generate`` — batched chat completions with per-token log-probs;
* ``train_step`` — the joint GRPO/PPO-clip loss over both roles' samples and one optimizer step;
* ``save`` / ``load`` — a complete, exactly resumable checkpoint (weights, optimizer, RNG);
* ``publish_weights`` — make the latest weights visible to the inference side (a no-op when
  training and generation share the same model object).

``local`` (PyTorch + transformers), ``ray`` and ``tinker`` implement it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from spade_train.backends.options import (
    BackendOptions,
    LocalOptions,
    MegatronOptions,
    RayOptions,
    TinkerOptions,
)
from spade_train.errors import BackendError, RegistryError
from spade_train.types import Generation, Message, SamplingParams, TrainSample


@runtime_checkable
class PolicyBackend(Protocol):
    name: str

    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation]:
        """Complete every conversation once (the chat template's generation prompt is added).

        ``tools``, when given, has one entry per conversation: that conversation's tool specs
        (OpenAI-style ``{"type": "function", "function": {name, description, parameters}}``
        dicts) or ``None``. They are passed to the chat template's ``tools=`` argument where
        the template supports it. A conversation whose last message is an assistant message
        is a prefill: the prompt ends inside that message and the completion continues it
        (``Generation.text`` is the continuation only).
        """
        ...

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One optimizer step over the joint batch; returns scalar metrics
        (at least ``loss``, ``grad_norm``, ``tokens``, ``clip_frac``)."""
        ...

    def save(self, path: Path) -> None:
        """Write a complete checkpoint into the directory ``path`` (atomically)."""
        ...

    def load(self, path: Path) -> None:
        """Restore the state written by :meth:`save`."""
        ...

    def publish_weights(self) -> None:
        """Push the current weights to the generation side."""
        ...

    def close(self) -> None: ...


def submit_train_step(
    backend: PolicyBackend, samples: Sequence[TrainSample]
) -> Callable[[], dict[str, float]]:
    """Start one update; the returned function waits for it and returns its metrics.

    A backend with a ``train_step_async(samples)`` method (``ray``) runs the update while the
    caller goes on; any other backend runs it here, before returning."""
    start = getattr(backend, "train_step_async", None)
    if start is not None:
        return start(samples)
    metrics = backend.train_step(samples)
    return lambda: metrics


BackendFactory = Callable[..., PolicyBackend]
ENTRY_POINT_GROUP = "spade_train.backends"


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: its name, a factory called with the flat keyword options, and the
    pydantic model of its own options (``backend.options`` in a recipe), checked at load."""

    name: str
    factory: BackendFactory
    options: type[BackendOptions]


_REGISTRY: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec) -> None:
    """Add a backend; a name registered twice is refused. Other packages register theirs
    through the ``spade_train.backends`` entry-point group (an object that is a BackendSpec)."""
    if spec.name in _REGISTRY:
        raise RegistryError(f"backend {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec


def backend_spec(name: str) -> BackendSpec:
    """The spec registered as ``name``; :class:`BackendError` naming the choices otherwise."""
    _load_entry_points()
    if name not in _REGISTRY:
        raise BackendError(
            f"unknown backend {name!r}; choose one of {', '.join(sorted(_REGISTRY)) or '(none)'}"
        )
    return _REGISTRY[name]


def available_backends() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)


def make_backend(name: str, **options: Any) -> PolicyBackend:
    """Create the backend registered as ``name`` with its (flat) keyword options."""
    return backend_spec(name).factory(**options)


_ENTRY_POINTS_LOADED = False


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        spec = ep.load()
        if not isinstance(spec, BackendSpec):
            raise RegistryError(f"entry point {ep.name} ({ep.value}) is not a BackendSpec")
        register_backend(spec)


# -- the built-in backends: imported only when made (torch, ray and tinker load slowly) -------


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
