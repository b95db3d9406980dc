"""Sending the trainer's weights to SGLang servers, in buckets of HF-named tensors.

The trainer side of one publish. It runs where the weights are (the trainer actor; with a
Megatron world, its rank 0, fed by ``export_hf_buckets``) and is told by the driver where to
send them (:class:`WeightPush`). Three ways, as slime and verl do it:

``distributed``
    A process group of the trainer (rank 0) and every GPU of every server (ranks from 1, in
    server order), formed for this publish and torn down after it. Per bucket: each server is
    told the names, dtypes and shapes (``/update_weights_from_distributed``) while the trainer
    broadcasts the tensors. NCCL on GPUs; gloo works the same on CPUs (the tests use it).
    The group is made the way SGLang makes its side (``init_custom_process_group``: a
    ``tcp://`` rendezvous, a store prefixed with the group name), so both ends agree.
``tensor``
    Colocated servers on the trainer's node: each bucket is pickled with torch's
    multiprocessing reductions (CUDA IPC handles on GPUs: the tensors are not copied) and
    posted to ``/update_weights_from_tensor``, one entry per tensor-parallel rank.
``disk``
    The fallback: an HF checkpoint written by the trainer under ``publish_dir/v<version>`` and
    loaded with ``/update_weights_from_disk``. The driver first checks that the directory is
    shared (see :func:`shared_marker`), so a path private to the trainer's node fails at once.

One push reaches each server once, however many rollout requests it serves.
"""

from __future__ import annotations

import base64
import io
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Literal

import torch

from spade_train.backends.sglang import SGLangClient
from spade_train.errors import BackendError

SyncMode = Literal["distributed", "tensor", "disk"]
NamedTensors = list[tuple[str, torch.Tensor]]


@dataclass(frozen=True)
class ServerTarget:
    """One SGLang server to update: its URL and how many GPUs (ranks) it spans."""

    url: str
    tp_size: int = 1


@dataclass(frozen=True)
class WeightPush:
    """What the driver asks the trainer to send, and where."""

    mode: SyncMode
    targets: tuple[ServerTarget, ...]
    version: str
    bucket_bytes: int = 512 << 20
    group_backend: str = "nccl"
    publish_dir: str | None = None
    timeout_s: float = 600.0
    master_address: str | None = None
    """The address servers reach the trainer at (``None``: this node's address)."""


@dataclass
class PushReport:
    """What one push moved."""

    tensors: int = 0
    bytes: int = 0
    buckets: int = 0
    seconds: float = 0.0
    names: list[str] = field(default_factory=list)


def iter_buckets(
    named: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int
) -> Iterator[NamedTensors]:
    """Group ``(name, tensor)`` pairs into lists of about ``bucket_bytes`` each (in order; a
    tensor larger than a bucket is a bucket of its own)."""
    bucket: NamedTensors = []
    size = 0
    for name, tensor in named:
        n = tensor.numel() * tensor.element_size()
        if bucket and size + n > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor.detach()))
        size += n
    if bucket:
        yield bucket


def dtype_name(dtype: torch.dtype) -> str:
    """The dtype as SGLang reads it back (``getattr(torch, name)``): ``bfloat16``, not ``torch.bfloat16``."""
    return str(dtype).removeprefix("torch.")


def node_address() -> str:
    """This node's address as other nodes reach it (Ray's view when Ray runs here)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except Exception:
        pass
    return socket.gethostbyname(socket.gethostname())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def open_group(
    backend: str, address: str, port: int, world_size: int, rank: int, name: str, timeout_s: float
) -> torch.distributed.ProcessGroup:
    """A process group outside the default one, made as SGLang's ``init_custom_process_group``
    makes it (the other end of a ``distributed`` push)."""
    from torch.distributed import PrefixStore
    from torch.distributed.distributed_c10d import _new_process_group_helper, _world, rendezvous

    timeout = timedelta(seconds=timeout_s)
    store, rank, world_size = next(
        rendezvous(f"tcp://{address}:{port}", rank, world_size, timeout=timeout)
    )
    store.set_timeout(timeout)
    pg, _ = _new_process_group_helper(
        world_size,
        rank,
        [],
        backend,
        PrefixStore(name, store),
        group_name=name,  # type: ignore[arg-type]
        timeout=timeout,
    )
    if not isinstance(pg, torch.distributed.ProcessGroup):
        raise BackendError(f"weight group {name}: this process is not a member (rank {rank})")
    _world.pg_group_ranks[pg] = {i: i for i in range(world_size)}
    return pg


def send_weights(buckets: Iterable[NamedTensors], push: WeightPush) -> PushReport:
    """Send every bucket to every target of ``push``; see the module doc for each mode."""
    start = time.perf_counter()
    if not push.targets:
        return PushReport()
    if push.mode == "distributed":
        report = _send_distributed(buckets, push)
    elif push.mode == "tensor":
        report = _send_tensor(buckets, push)
    else:
        raise BackendError(f"send_weights: mode {push.mode!r} is written by save_hf, not sent")
    report.seconds = time.perf_counter() - start
    return report


def _fan_out(fn, targets: tuple[ServerTarget, ...]) -> list:
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        return [f.result() for f in [pool.submit(fn, i, t) for i, t in enumerate(targets)]]


def _send_distributed(buckets: Iterable[NamedTensors], push: WeightPush) -> PushReport:
    address = push.master_address or node_address()
    port = free_port()
    world = 1 + sum(t.tp_size for t in push.targets)
    offsets = [1 + sum(t.tp_size for t in push.targets[:i]) for i in range(len(push.targets))]
    name = f"spade-weights-{push.version}-{uuid.uuid4().hex[:8]}"
    clients = [SGLangClient(t.url, timeout_s=push.timeout_s, retries=0) for t in push.targets]
    report = PushReport()
    with ThreadPoolExecutor(max_workers=max(1, len(clients))) as pool:
        joins = [
            pool.submit(
                c.init_weights_group, address, port, offsets[i], world, name, push.group_backend
            )
            for i, c in enumerate(clients)
        ]
        group = open_group(push.group_backend, address, port, world, 0, name, push.timeout_s)
        for j in joins:
            j.result()
        try:
            for bucket in buckets:
                names = [n for n, _ in bucket]
                dtypes = [dtype_name(t.dtype) for _, t in bucket]
                shapes = [list(t.shape) for _, t in bucket]
                calls = [
                    pool.submit(
                        c.update_from_distributed, names, dtypes, shapes, name, push.version
                    )
                    for c in clients
                ]
                for _, tensor in bucket:
                    torch.distributed.broadcast(tensor.contiguous(), src=0, group=group)
                for call in calls:
                    call.result()
                report.buckets += 1
                report.tensors += len(bucket)
                report.bytes += sum(t.numel() * t.element_size() for _, t in bucket)
                report.names += names
        finally:
            for c in clients:
                try:
                    c.destroy_weights_group(name)
                except BackendError:
                    pass
            torch.distributed.destroy_process_group(group)
    return report


def serialize_bucket(bucket: NamedTensors) -> str:
    """A bucket pickled with torch's multiprocessing reductions, base64 (SGLang's
    ``MultiprocessingSerializer`` format: CUDA tensors travel as IPC handles)."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's reductions)

    buf = io.BytesIO()
    ForkingPickler(buf).dump(bucket)
    return base64.b64encode(buf.getvalue()).decode()


def _send_tensor(buckets: Iterable[NamedTensors], push: WeightPush) -> PushReport:
    clients = [SGLangClient(t.url, timeout_s=push.timeout_s, retries=0) for t in push.targets]
    report = PushReport()
    for bucket in buckets:
        payload = serialize_bucket(bucket)

        def post(i: int, t: ServerTarget, payload: str = payload) -> None:
            clients[i].update_from_tensor([payload] * t.tp_size, push.version)

        _fan_out(post, push.targets)
        report.buckets += 1
        report.tensors += len(bucket)
        report.bytes += sum(t.numel() * t.element_size() for _, t in bucket)
        report.names += [n for n, _ in bucket]
    return report


MARKER = ".spade-shared"


def shared_marker(directory: str, token: str) -> Path:
    """Write ``token`` into a marker file in ``directory`` (the trainer does this); every other
    process checks it can read the same token there (:func:`reads_marker`)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    tmp = path / f"{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(token)
    os.replace(tmp, marker)
    return marker


def reads_marker(directory: str, token: str) -> bool:
    """Whether this process sees the marker the trainer wrote, with its token."""
    try:
        return (Path(directory) / MARKER).read_text() == token
    except OSError:
        return False
