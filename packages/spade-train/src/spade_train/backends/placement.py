"""Where a GPU recipe's actors go: one bundle per GPU, ranks in node order, a fit check.

A recipe asks for ``trainer_gpus`` (one Megatron rank each) and ``rollout_gpus`` (SGLang
engines of ``engine_tp`` GPUs each). The placement group has one bundle per GPU,
``{"GPU": 1, "CPU": cpus_per_gpu}`` (as slime does), so a recipe spans nodes; colocated, the
engines share the trainer's bundles (a GPU holds a trainer rank and an engine's rank, with
fractional shares), otherwise they get bundles of their own after the trainer's.

Once the group is placed, every bundle is asked where it landed (node, GPU id) and bundles are
ordered by node, then GPU: rank ``r`` of the trainer takes the ``r``-th bundle (tensor-parallel
neighbours share a node) and each engine takes ``engine_tp`` consecutive bundles of one node.
:func:`check_fits` says in one line when the alive nodes cannot hold the recipe, before
anything waits on the group. The dry run prints :meth:`PlacementSpec.plan`, computed by the
same code the backend launches with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spade_train.errors import PlacementError

TRAINER_SHARE_COLOCATED = 0.4
ENGINE_SHARE_COLOCATED = 0.2
"""A colocated GPU's split between the trainer rank and the engine (slime's shares)."""


@dataclass(frozen=True)
class NodeResources:
    """An alive node's resources (from ``ray.nodes()``)."""

    node: str
    gpus: float
    cpus: float


@dataclass(frozen=True)
class BundleSite:
    """Where one bundle landed: its index in the group, its node and its GPU id there."""

    bundle: int
    node: str
    gpu: int


@dataclass(frozen=True)
class PlacementSpec:
    """The placement a recipe asks for (see the module doc)."""

    trainer_gpus: int
    rollout_gpus: int
    engine_tp: int = 1
    colocate: bool = True
    cpus_per_gpu: float = 1.0

    def __post_init__(self) -> None:
        if self.trainer_gpus < 1:
            raise PlacementError("trainer_gpus must be >= 1 (one bundle per trainer rank)")
        if self.rollout_gpus and self.rollout_gpus % self.engine_tp:
            raise PlacementError(
                f"rollout_gpus={self.rollout_gpus} is not a multiple of the engines' tp_size "
                f"{self.engine_tp}; change backend.options.rollout_gpus or sglang.tp_size"
            )
        if self.colocate and self.rollout_gpus > self.trainer_gpus:
            raise PlacementError(
                f"colocated engines use the trainer's GPUs: rollout_gpus={self.rollout_gpus} "
                f"> trainer_gpus={self.trainer_gpus}; set colocate false or lower rollout_gpus"
            )

    @property
    def n_bundles(self) -> int:
        return self.trainer_gpus if self.colocate else self.trainer_gpus + self.rollout_gpus

    @property
    def n_engines(self) -> int:
        return self.rollout_gpus // self.engine_tp

    def bundles(self) -> list[dict[str, float]]:
        """The placement group's bundles: one per GPU."""
        return [{"GPU": 1.0, "CPU": self.cpus_per_gpu} for _ in range(self.n_bundles)]

    def trainer_share(self) -> float:
        return TRAINER_SHARE_COLOCATED if self.colocate else 1.0

    def engine_share(self) -> float:
        return ENGINE_SHARE_COLOCATED if self.colocate else 1.0

    def engine_spans(self) -> list[list[int]]:
        """The ordered-bundle positions of each engine (before the group is placed)."""
        first = 0 if self.colocate else self.trainer_gpus
        return [
            list(range(first + e * self.engine_tp, first + (e + 1) * self.engine_tp))
            for e in range(self.n_engines)
        ]

    def plan(self, gpus_per_node: int | None = None) -> dict[str, Any]:
        """The placement as the dry run prints it (and, given a node size, whether it fits)."""
        out: dict[str, Any] = {
            "bundles": f"{self.n_bundles} x {{GPU: 1, CPU: {self.cpus_per_gpu:g}}}",
            "trainer": f"{self.trainer_gpus} ranks, bundles 0-{self.trainer_gpus - 1} "
            f"(GPU share {self.trainer_share():g})",
            "engines": f"{self.n_engines} x tp {self.engine_tp} on bundles "
            + ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in self.engine_spans())
            + (f" (colocated, GPU share {self.engine_share():g})" if self.colocate else ""),
        }
        if gpus_per_node:
            nodes = -(-self.n_bundles // gpus_per_node)
            out["fits"] = f"{nodes} node(s) of {gpus_per_node} GPUs"
            if self.engine_tp > gpus_per_node:
                raise PlacementError(
                    f"an engine of tp_size {self.engine_tp} cannot fit one node of "
                    f"{gpus_per_node} GPUs; lower backend.options.sglang.tp_size"
                )
        return out


def check_fits(spec: PlacementSpec, nodes: Sequence[NodeResources]) -> None:
    """Raise :class:`PlacementError` (one line) unless the alive nodes can hold ``spec``."""
    per_node = [
        int(min(n.gpus, n.cpus / spec.cpus_per_gpu if spec.cpus_per_gpu else n.gpus)) for n in nodes
    ]
    holds = sum(per_node)
    shape = ", ".join(f"{n.node}: {n.gpus:g} GPU {n.cpus:g} CPU" for n in nodes) or "no nodes"
    if holds < spec.n_bundles:
        raise PlacementError(
            f"the recipe needs {spec.n_bundles} bundles of {{GPU: 1, CPU: {spec.cpus_per_gpu:g}}} "
            f"({spec.trainer_gpus} trainer GPUs, {spec.rollout_gpus} rollout GPUs, "
            f"colocate={spec.colocate}) but the alive nodes hold {holds} ({shape}); "
            "add nodes or lower backend.options.trainer_gpus / rollout_gpus"
        )
    if spec.n_engines and spec.engine_tp > max(per_node, default=0):
        raise PlacementError(
            f"an engine spans {spec.engine_tp} GPUs of one node but the largest node holds "
            f"{max(per_node, default=0)} bundles ({shape}); lower backend.options.sglang.tp_size"
        )


def order_sites(sites: Sequence[BundleSite]) -> list[BundleSite]:
    """Bundles in node order, then by GPU id (nodes in order of first appearance)."""
    first: dict[str, int] = {}
    for s in sorted(sites, key=lambda s: s.bundle):
        first.setdefault(s.node, len(first))
    return sorted(sites, key=lambda s: (first[s.node], s.gpu, s.bundle))


@dataclass(frozen=True)
class Layout:
    """Ordered bundles split into trainer ranks and engines."""

    trainer: list[BundleSite]
    engines: list[list[BundleSite]]


def assign(spec: PlacementSpec, sites: Sequence[BundleSite]) -> Layout:
    """Trainer ranks and engine spans over the placed bundles (see the module doc)."""
    ordered = order_sites(sites)
    if len(ordered) != spec.n_bundles:
        raise PlacementError(f"{len(ordered)} placed bundles for a spec of {spec.n_bundles}")
    engines = [[ordered[i] for i in span] for span in spec.engine_spans()]
    for e, span in enumerate(engines):
        if len({s.node for s in span}) > 1:
            raise PlacementError(
                f"engine {e} (tp {spec.engine_tp}) would span nodes "
                f"{sorted({s.node for s in span})}; use nodes with a multiple of "
                f"{spec.engine_tp} GPUs or lower backend.options.sglang.tp_size"
            )
        gpus = sorted(s.gpu for s in span)
        if gpus != list(range(gpus[0], gpus[0] + len(gpus))):
            raise PlacementError(
                f"engine {e} got GPUs {gpus} of its node, not consecutive ones (SGLang runs "
                "--tp-size GPUs from --base-gpu-id on); give Ray whole nodes or lower sglang.tp_size"
            )
    return Layout(ordered[: spec.trainer_gpus], engines)
