"""In-loop evaluation through a training policy: no server, no second copy of the model.

spade-eval never imports spade-train. Anything with a ``generate(conversations, params)``
method returning objects with a ``text`` attribute (spade-train's ``PolicyBackend`` is one)
satisfies `PolicyLike`; `PolicyClient` turns it into a model client, and `evaluate_policy`
runs a config through it and returns flat scalar metrics for ``metrics.jsonl`` and W&B.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .models import Chat


class GenerationLike(Protocol):
    """One completion: only its ``text`` is read."""

    text: str


@runtime_checkable
class PolicyLike(Protocol):
    """What spade-eval needs from a training policy backend."""

    def generate(self, conversations: Sequence[Sequence[Any]], params: Any) -> Sequence[Any]: ...


@dataclass(frozen=True)
class PolicySampling:
    """Sampling settings in the field names of spade-train's ``SamplingParams`` (the default
    ``params_factory``; pass ``spade_train.SamplingParams`` to build that type instead)."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int | None = None


def sampling_kwargs(sampling: dict[str, Any]) -> dict[str, Any]:
    """An eval config's ``sampling`` mapping in ``SamplingParams`` keyword names."""
    out: dict[str, Any] = {}
    names = {"max_tokens": "max_new_tokens", "temperature": "temperature", "top_p": "top_p",
             "top_k": "top_k", "seed": "seed", "stop": "stop"}  # fmt: skip
    for key, value in sampling.items():
        if key in names and value is not None:
            out[names[key]] = tuple(value) if key == "stop" else value
    return out


class PolicyClient:
    """A model client over a `PolicyLike`: one ``generate`` call per batch."""

    def __init__(
        self,
        policy: PolicyLike,
        *,
        params_factory: Callable[..., Any] = PolicySampling,
        name: str = "policy",
    ) -> None:
        self.policy = policy
        self.params_factory = params_factory
        self.name = name

    def complete(self, batch: list[Chat], sampling: dict[str, Any]) -> list[str]:
        """The policy's completions of ``batch`` under ``sampling``."""
        if not batch:
            return []
        params = self.params_factory(**sampling_kwargs(sampling))
        generations = self.policy.generate(batch, params)
        return [str(g.text) for g in generations]


def scalar_metrics(summary: dict[str, Any], prefix: str = "eval") -> dict[str, float]:
    """``<prefix>/<suite>/<mean|stderr|n|pass@k…>`` per suite, ``<prefix>/<part>`` for the
    parts, and ``<prefix>/<paper key>`` for every suite's paper metrics."""
    out: dict[str, float] = {}
    for suite, entry in summary.get("suites", {}).items():
        for key, value in entry.items():
            if isinstance(value, (int, float)):
                out[f"{prefix}/{suite}/{key}"] = float(value)
        for part, stats in (entry.get("parts") or {}).items():
            out[f"{prefix}/{suite}/{part}/mean"] = float(stats["mean"])
    for key, value in (summary.get("metrics") or {}).items():
        if isinstance(value, (int, float)):
            out[f"{prefix}/{key}"] = float(value)
    return out


def evaluate_policy(
    policy: PolicyLike,
    config: dict[str, Any] | str,
    out_dir: str | os.PathLike[str],
    *,
    params_factory: Callable[..., Any] = PolicySampling,
    suites: list[str] | None = None,
    limit: int | None = None,
    prefix: str = "eval",
) -> dict[str, float]:
    """Evaluate ``policy`` on ``config`` (a shipped name, a path or a dict); records and
    ``results.json`` go to ``out_dir`` (a rerun with the same ``out_dir`` scores only what is
    missing). Returns `scalar_metrics` of the summary."""
    from .runner import evaluate

    client = PolicyClient(policy, params_factory=params_factory)
    summary = evaluate(client, config, out_dir, suites=suites, limit=limit, progress=False)
    return scalar_metrics(summary, prefix)
