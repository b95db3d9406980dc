"""The ``ray`` backend's typed options: its own, and the inner backend's (``inner_options``),
checked against the model the inner backend registered (:mod:`spade_train.backends.registry`),
so a misplaced option fails at load with its key path."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from spade_train.backends.options import BackendOptions, MegatronOptions
from spade_train.backends.registry import backend_spec
from spade_train.config_base import MAX_COUNT


class RayOptions(BackendOptions):
    """A trainer actor (the inner backend) and rollout workers on a Ray cluster."""

    inner: str = "local"
    """The backend the trainer and rollout actors run (``local`` on CPU, ``megatron`` on GPUs)."""
    inner_options: dict[str, Any] = Field(default_factory=dict)
    """The inner backend's own options, checked against its model."""
    num_rollout_workers: int = Field(1, ge=1, le=MAX_COUNT)
    """Rollout actors that generate (each with its own copy of the policy, or an SGLang server)."""
    num_trainers: Literal[1] = 1
    """Trainer actors (one: the inner backend scales over its own GPUs)."""
    colocate: bool = True
    """Trainer and rollout workers share one placement-group bundle (each gets half), instead of one
    bundle each."""
    num_cpus_per_worker: float = Field(1.0, gt=0)
    """CPUs of each placement-group bundle."""
    num_gpus_per_worker: float = Field(0.0, ge=0)
    """GPUs of each placement-group bundle."""
    sglang_url: str | None = None
    """Generate on an SGLang server at this URL instead of the inner backend."""
    call_timeout_s: float = Field(600.0, gt=0)
    """The longest one call to an actor may take; a rollout worker past it is restarted once."""
    ray_address: str | None = None
    """The Ray cluster to join; None: start a local one."""
    ray_num_cpus: int | None = Field(None, ge=1, le=MAX_COUNT)
    """CPUs of the local Ray cluster when one is started (None: all)."""
    worker_threads: int | None = Field(1, ge=1, le=MAX_COUNT)
    """torch threads in each actor (None: torch's default)."""
    inner_import: str | None = None
    """A module the actors import first (an inner backend registered outside spade-train)."""

    def inner_model(self) -> BackendOptions:
        return backend_spec(self.inner).options.model_validate(self.inner_options)

    def honours(self) -> tuple[str, frozenset[str]]:
        """The inner backend trains, so its declared support is the ray backend's."""
        who, keys = self.inner_model().honours()
        return who or self.inner, keys

    def flat(self) -> dict[str, Any]:
        out = self.model_dump(exclude={"inner_options"})
        out.update(self.inner_model().flat())
        return out

    def plan(self, common: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        cpus, gpus = self.num_cpus_per_worker, self.num_gpus_per_worker
        bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
        n_bundles = 1 if self.colocate else 1 + self.num_rollout_workers
        trainer_gpus = gpus / 2 if self.colocate else gpus
        inner = self.inner_model()
        if isinstance(inner, MegatronOptions):
            inner_plan = inner.plan(common, defaults, world_size=max(1, int(trainer_gpus)))
        else:
            inner_plan = inner.plan(common, defaults)
        return {
            "placement_group": [dict(bundle) for _ in range(n_bundles)],
            "trainer": {
                "inner": self.inner,
                "cpus": cpus / 2 if self.colocate else cpus,
                "gpus": trainer_gpus,
            },
            "rollout": {
                "workers": self.num_rollout_workers,
                "engine": f"sglang at {self.sglang_url}" if self.sglang_url else self.inner,
            },
            "inner": inner_plan,
        }
