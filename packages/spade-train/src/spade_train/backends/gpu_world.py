"""A GPU recipe's whole world from its ``ray`` options: the placement (one bundle per GPU), the
Megatron training world on the trainer's bundles (ranks, TP/PP/EP/DP, ranks per node) and the
SGLang engines (count, ``--tp-size`` each).

:func:`gpu_world` is the one place this is computed: the recipe check at load
(``RayOptions``), the dry-run plan and the launch (``RayBackend`` via
:func:`spade_train.backends.gpu_shape.start_trainer`) all call it, so the plan is what launches.
The Megatron world is one rank per trainer GPU: ``inner_options.world_size`` unset means
``trainer_gpus``; set to anything else, or a ``trainer_gpus`` that tensor x pipeline parallel
does not divide, the recipe is refused with one line naming the fields and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spade_train.backends.megatron_world import WorldLayout, rank_order, torchrun_env, world_layout
from spade_train.backends.placement import Layout, PlacementSpec
from spade_train.errors import BackendError


@dataclass(frozen=True)
class GpuWorld:
    """The placement, the trainer's world (None for a one-process inner backend), the engines."""

    spec: PlacementSpec
    megatron: WorldLayout | None
    gpus_per_node: int

    @property
    def ranks(self) -> int:
        return self.megatron.world_size if self.megatron else 1

    def nodes(self) -> list[dict[str, Any]]:
        """Per node of ``gpus_per_node`` GPUs (bundles in node order): its ranks and engines."""
        n_nodes = -(-self.spec.n_bundles // self.gpus_per_node)
        out = []
        for node in range(n_nodes):
            lo, hi = node * self.gpus_per_node, (node + 1) * self.gpus_per_node
            ranks = [r for r in range(self.ranks) if lo <= r < hi]
            engines = [e for e, span in enumerate(self.spec.engine_spans()) if lo <= span[0] < hi]
            out.append({"node": node, "ranks": ranks, "engines": engines})
        return out

    def plan(self) -> dict[str, Any]:
        world = (
            self.megatron.plan()
            if self.megatron is not None
            else {"world_size": 1, "ranks": "in the trainer actor"}
        )
        return {
            "training_world": world,
            "rollout_engines": {"count": self.spec.n_engines, "tp_size": self.spec.engine_tp},
            "per_node": [
                f"node {n['node']}: ranks {_span(n['ranks'])}, engines {_span(n['engines'])}"
                for n in self.nodes()
            ],
        }

    def rank_envs(self, layout: Layout, port: int) -> list[dict[str, str]]:
        """The ``torchrun`` environment of each rank over the placed trainer bundles (the same
        order and rendezvous rule :class:`~spade_train.backends.megatron_world.RayRanks` uses)."""
        nodes = [s.node for s in layout.trainer]
        order = rank_order(nodes)
        addr = nodes[min(range(len(order)), key=lambda i: order[i][0])]
        envs = [torchrun_env(r, len(nodes), lr, lws, addr, port) for r, lr, lws in order]
        return sorted(envs, key=lambda e: int(e["RANK"]))

    def engine_gpus(self, layout: Layout) -> list[tuple[str, int]]:
        """``(node, --base-gpu-id)`` of each engine over the placed bundles."""
        return [(span[0].node, min(s.gpu for s in span)) for span in layout.engines]


def _span(xs: Sequence[int]) -> str:
    if not xs:
        return "none"
    return f"{xs[0]}-{xs[-1]}" if len(xs) > 1 else str(xs[0])


def gpu_world(options: Mapping[str, Any]) -> GpuWorld:
    """The world of a GPU-shape ``ray`` backend (``RayOptions.model_dump()``-like mapping with
    ``inner``, ``inner_options``, ``trainer_gpus``, ``rollout_gpus``, ``colocate``,
    ``cpus_per_gpu``, ``gpus_per_node``, ``sglang``); raises :class:`BackendError` in one line."""
    sglang = dict(options.get("sglang") or {})
    trainer = int(options.get("trainer_gpus", 0))
    spec = PlacementSpec(
        trainer,
        int(options.get("rollout_gpus", 0)),
        int(sglang.get("tp_size", 1)),
        bool(options.get("colocate", True)),
        float(options.get("cpus_per_gpu", 1.0)),
    )
    inner = str(options.get("inner", "local"))
    if inner != "megatron":  # one process; start_trainer refuses trainer_gpus != 1
        return GpuWorld(spec, None, int(options.get("gpus_per_node", 8)))
    return GpuWorld(spec, megatron_world(options), int(options.get("gpus_per_node", 8)))


def megatron_world(options: Mapping[str, Any]) -> WorldLayout:
    """The Megatron world on ``trainer_gpus`` bundles: one rank per GPU."""
    # RayOptions.model_dump() nests the inner options; the launch's flat kwargs do not
    inner = dict(options.get("inner_options") or options)
    trainer = int(options.get("trainer_gpus", 0))
    declared = inner.get("world_size")
    if declared is not None and int(declared) != trainer:
        raise BackendError(
            f"backend.options.inner_options.world_size={declared} but backend.options."
            f"trainer_gpus={trainer}: the Megatron world is one rank per trainer GPU; set both "
            "to the same number (tensor_parallel x pipeline_parallel x data parallel)"
        )
    tp = int(inner.get("tensor_parallel", 1))
    pp = int(inner.get("pipeline_parallel", 1))
    ep = int(inner.get("expert_parallel", 1))
    if trainer % (tp * pp) or (trainer // (tp * pp)) % ep:
        raise BackendError(
            f"backend.options.trainer_gpus={trainer} does not split into inner_options."
            f"tensor_parallel={tp} x pipeline_parallel={pp} x data parallel with expert_parallel="
            f"{ep} dividing data parallel; set trainer_gpus to a multiple of {tp * pp * ep} "
            "or change the parallel sizes"
        )
    return world_layout({**inner, "world_size": trainer})
