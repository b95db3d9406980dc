"""The Megatron trainer's world: its layout, one process per rank, and their rendezvous.

:func:`world_layout` turns the backend's options into the world it will start (ranks and the
tensor / pipeline / expert / data parallel sizes); ``spade train --dry-run`` prints the same
object (``MegatronOptions.plan``), so the plan is what the launch builds.

Each rank runs in its own process with the environment ``torchrun`` would give it
(``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``): a world of one runs in the caller's process (:class:`InProcessRanks`),
a larger one as one Ray actor per rank (:class:`RayRanks`), ranks ordered so that the ranks of
one node are consecutive (Megatron's tensor-parallel groups are consecutive ranks), the
rendezvous port a free one on rank 0's node. :func:`init_rank` then starts
``torch.distributed`` (NCCL on GPUs, gloo on CPU) and megatron-core's ``parallel_state``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import torch

from spade_train.backends.megatron_map import ParallelSettings
from spade_train.errors import BackendError

INSTALL_HINT = "install megatron-core: pip install 'spade-train[megatron]'"


@dataclass(frozen=True)
class WorldLayout:
    """How many ranks the trainer starts and how they split the model."""

    world_size: int
    parallel: ParallelSettings

    @property
    def dp(self) -> int:
        return self.world_size // (self.parallel.tp * self.parallel.pp)

    def plan(self) -> dict[str, Any]:
        p = self.parallel
        return {
            "world_size": self.world_size,
            "parallel": {
                "tp": p.tp,
                "pp": p.pp,
                "ep": p.ep,
                "dp": self.dp,
                "sp": p.sequence_parallel,
            },  # fmt: skip
            "ranks": "in this process" if self.world_size == 1 else "one Ray actor per rank",
        }


def world_layout(options: Mapping[str, Any]) -> WorldLayout:
    """The world of a Megatron backend with these options (``tensor_parallel``,
    ``pipeline_parallel``, ``expert_parallel``, ``sequence_parallel``, ``world_size``).

    ``world_size`` unset: the smallest world that holds the layout (tp x pp x ep).
    """
    tp = int(options.get("tensor_parallel", 1))
    pp = int(options.get("pipeline_parallel", 1))
    ep = int(options.get("expert_parallel", 1))
    world = options.get("world_size")
    world_size = int(world) if world is not None else max(1, tp) * max(1, pp) * max(1, ep)
    if pp > 1:
        raise BackendError(
            f"pipeline_parallel={pp}: the megatron backend trains with tensor, expert and data "
            "parallelism only (no pipeline schedule); set pipeline_parallel: 1"
        )
    opts = {**options, "sequence_parallel": bool(options.get("sequence_parallel")) and tp > 1}
    parallel = ParallelSettings.from_options(opts, world_size)
    return WorldLayout(world_size, parallel)


def torchrun_env(
    rank: int, world_size: int, local_rank: int, local_world_size: int, addr: str, port: int
) -> dict[str, str]:
    """The variables ``torchrun`` sets for one rank."""
    return {
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world_size),
    }


def rank_order(nodes: Sequence[str]) -> list[tuple[int, int, int]]:
    """``(rank, local_rank, local_world_size)`` of each slot, given each slot's node: slots are
    grouped by node (nodes in order of first appearance), so one node's ranks are consecutive."""
    order = list(dict.fromkeys(nodes))
    ranked = sorted(range(len(nodes)), key=lambda i: (order.index(nodes[i]), i))
    out: list[tuple[int, int, int]] = [(0, 0, 0)] * len(nodes)
    seen: dict[str, int] = {}
    for rank, slot in enumerate(ranked):
        node = nodes[slot]
        out[slot] = (rank, seen.get(node, 0), nodes.count(node))
        seen[node] = seen.get(node, 0) + 1
    return out


def free_port() -> int:
    """A TCP port nothing listens on now (bound to port 0, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` when this process or the Ray cluster it is connected to has a GPU."""
    if device != "auto":
        if device not in ("cuda", "cpu"):
            raise BackendError(f"megatron backend: device {device!r}; use auto, cuda or cpu")
        return device
    if torch.cuda.is_available():
        return "cuda"
    try:
        import ray

        if ray.is_initialized() and ray.cluster_resources().get("GPU", 0) > 0:
            return "cuda"
    except ImportError:
        pass
    return "cpu"


def import_megatron() -> None:
    """Import the megatron-core modules the backend uses, without their notes that Transformer
    Engine and Apex are missing (the backend uses neither); BackendError when not installed."""
    import importlib
    import warnings

    names = ("megatron.core.parallel_state", "megatron.core.tensor_parallel",
             "megatron.core.models.gpt", "megatron.core.models.gpt.gpt_layer_specs",
             "megatron.core.transformer.moe.moe_utils")  # fmt: skip
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*(Transformer Engine|Apex) (is|are) not installed"
        )
        try:
            for name in names:
                importlib.import_module(name)
        except ImportError as exc:
            raise BackendError(f"megatron-core is not importable ({exc}); {INSTALL_HINT}") from None


def init_rank(env: Mapping[str, str], layout: WorldLayout, device: str, seed: int) -> bool:
    """Start this rank: ``torch.distributed`` and megatron-core's parallel groups. True when
    this call started the process group (the caller then destroys it when done)."""
    import torch.distributed as dist

    import_megatron()
    from megatron.core import parallel_state, tensor_parallel

    from spade_train.backends.megatron_model import (
        install_compat,
        install_cpu_shim,
        seed_cpu_rng_tracker,
    )

    os.environ.update(env)
    install_compat()
    if device == "cpu":
        install_cpu_shim()
    else:
        local = int(env["LOCAL_RANK"]) if torch.cuda.device_count() > 1 else 0
        torch.cuda.set_device(local)
    started = not dist.is_initialized()
    if started:
        dist.init_process_group(
            "nccl" if device == "cuda" else "gloo",
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            timeout=timedelta(minutes=30),
        )
    elif dist.get_world_size() != layout.world_size:
        raise BackendError(
            f"torch.distributed already runs a world of {dist.get_world_size()} here; "
            f"the megatron backend needs {layout.world_size}"
        )
    if parallel_state.model_parallel_is_initialized():  # a backend before this one
        parallel_state.destroy_model_parallel()
    p = layout.parallel
    parallel_state.initialize_model_parallel(p.tp, p.pp, expert_model_parallel_size=p.ep)
    torch.manual_seed(seed)
    if device == "cuda":
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
    else:
        seed_cpu_rng_tracker(seed)
    return started


class RankGroup(Protocol):
    """The ranks of one world: ``call`` runs a method of every rank's trainer at once."""

    world_size: int

    def call(self, method: str, *args: Any) -> list[Any]:
        """Results in rank order."""
        ...

    def close(self) -> None: ...


class InProcessRanks:
    """A world of one rank in this process (the rendezvous on a free local port). megatron-core
    keeps its parallel groups in module globals: one such world per process at a time."""

    world_size = 1
    _open = False

    def __init__(self, make: Callable[[dict[str, str]], Any]) -> None:
        if InProcessRanks._open:
            raise BackendError(
                "a megatron world already runs in this process; close that backend first"
            )
        env = torchrun_env(0, 1, 0, 1, "127.0.0.1", free_port())
        self.rank = make(env)
        InProcessRanks._open = True

    def call(self, method: str, *args: Any) -> list[Any]:
        return [getattr(self.rank, method)(*args)]

    def close(self) -> None:
        if self.rank is not None:
            self.rank.close()
            self.rank = None
            InProcessRanks._open = False


def to_cpu(obj: Any) -> Any:
    """Tensors (also inside lists, tuples and dicts) moved to the CPU, for the object store."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, list | tuple):
        return type(obj)(to_cpu(x) for x in obj)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    return obj


class _RankActor:
    """One rank of the world in a Ray actor."""

    def where(self) -> tuple[str, int]:
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def start(self, env: dict[str, str], make: Callable[[dict[str, str]], Any]) -> bool:
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
        self.rank = make(env)
        return True

    def call(self, method: str, *args: Any) -> Any:
        return to_cpu(getattr(self.rank, method)(*args))


class RayRanks:
    """One Ray actor per rank, in a placement group of one bundle per rank (given, or made
    here: ``{"GPU": 1, "CPU": cpus}`` each on GPUs, ``{"CPU": cpus}`` on CPU)."""

    def __init__(self, layout: WorldLayout, make: Callable[[dict[str, str]], Any], device: str,
                 cpus_per_rank: float = 1.0, timeout_s: float = 3600.0,
                 placement_group: Any = None, bundle_indices: Sequence[int] | None = None) -> None:  # fmt: skip
        try:
            import ray
            from ray.util.placement_group import placement_group as make_pg
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        except ImportError:
            raise BackendError(
                f"a megatron world of {layout.world_size} ranks runs on Ray: "
                "pip install 'spade-train[ray]'"
            ) from None
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        self.world_size, self.timeout_s, self._own_pg = layout.world_size, timeout_s, None
        gpu = {"GPU": 1.0} if device == "cuda" else {}
        if placement_group is None:
            bundle = {"CPU": cpus_per_rank, **gpu}
            placement_group = make_pg([dict(bundle) for _ in range(self.world_size)], "PACK")
            self._own_pg = placement_group
            bundle_indices = list(range(self.world_size))
        self._get(placement_group.ready(), "placement group")
        slots = [PlacementGroupSchedulingStrategy(placement_group, i)
                 for i in (bundle_indices or range(self.world_size))]  # fmt: skip
        for attempt in (1, 2):
            self.actors: list[Any] = self._spawn(slots, cpus_per_rank, gpu.get("GPU", 0.0))
            try:
                self._start(make)
                return
            except BackendError as exc:  # the free port was taken before the rendezvous
                for a in self.actors:
                    ray.kill(a)
                if attempt == 2 or "address already in use" not in str(exc).lower():
                    self.close()
                    raise

    def _spawn(self, slots: list[Any], cpus: float, gpus: float) -> list[Any]:
        import ray

        actor: Any = ray.remote(_RankActor)
        threads = {"OMP_NUM_THREADS": str(max(1, int(cpus)))}
        return [actor.options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy=slot,
                              runtime_env={"env_vars": threads}).remote()
                for slot in slots]  # fmt: skip

    def _start(self, make: Callable[[dict[str, str]], Any]) -> None:
        """Ranks in node order, the rendezvous on a free port of rank 0's node."""
        where = self._get([a.where.remote() for a in self.actors], "where")
        order = rank_order([ip for ip, _ in where])
        by_rank = sorted(range(len(order)), key=lambda i: order[i][0])
        self.actors = [self.actors[i] for i in by_rank]
        addr, port = where[by_rank[0]]
        envs = [torchrun_env(order[i][0], self.world_size, order[i][1], order[i][2], addr, port)
                for i in by_rank]  # fmt: skip
        self._get(
            [a.start.remote(e, make) for a, e in zip(self.actors, envs, strict=True)], "start"
        )

    def _get(self, refs: Any, what: str) -> Any:
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        try:
            return ray.get(refs, timeout=self.timeout_s)
        except GetTimeoutError:
            raise BackendError(
                f"megatron world: {what} took longer than {self.timeout_s:g} s"
            ) from None
        except RayError as exc:
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"megatron world: {what} failed on a rank: {first}") from None

    def call(self, method: str, *args: Any) -> list[Any]:
        import ray

        put = [ray.put(a) for a in args]  # once, not once per rank
        return list(self._get([a.call.remote(method, *put) for a in self.actors], method))

    def close(self) -> None:
        import ray

        try:
            self._get([a.call.remote("close") for a in self.actors], "close")
        except BackendError:
            pass
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._own_pg is not None:
            ray.util.remove_placement_group(self._own_pg)
            self._own_pg = None
