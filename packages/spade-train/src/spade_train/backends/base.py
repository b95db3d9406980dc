"""The policy backend interface.

The self-play loop talks to exactly one object implementing :class:`PolicyBackend`:

* ``generate`` — batched chat completions with per-token log-probs;
* ``train_step`` — the joint GRPO/PPO-clip loss over both roles' samples and one optimizer step;
* ``save`` / ``load`` — a complete, exactly resumable checkpoint (weights, optimizer, RNG);
* ``publish_weights`` — make the latest weights visible to the inference side (a no-op when
  training and generation share the same model object).

``local`` (PyTorch + transformers), ``ray``, ``megatron`` and ``tinker`` implement it; the
registry that makes them by name is :mod:`spade_train.backends.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from spade_train.types import Generation, Message, SamplingParams, ToolSpec, TrainSample


@runtime_checkable
class PolicyBackend(Protocol):
    name: str

    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[ToolSpec] | None] | None = None,
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
