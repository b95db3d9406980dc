"""Weights in and out of one rank of the Megatron world.

Import (:func:`load_hf`): every rank reads from the HF checkpoint only the tensors of its own
parameters (:func:`~spade_train.backends.megatron_map.param_from_hf`) and keeps its slice:
tensor-parallel parameters are cut along their ``partition_dim`` (the gated MLP's
``linear_fc1`` per half, since each rank holds its slice of the gate and of the up projection),
experts under expert parallelism are this rank's ``num_experts / ep`` consecutive experts.

Export (:func:`hf_buckets`): every rank walks its parameters in the same order, all-gathers
each across its tensor-parallel group (and an expert across its expert-parallel group), and
converts it to HF names; buckets close at the same points on every rank (their sizes are
computed from whole tensors, which every rank has after the gather). Rank 0 yields the HF
tensors; the others yield empty buckets, which keeps every rank's collectives in step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from spade_train.backends.megatron_map import QwenShape, param_from_hf, param_to_hf

_LOCAL_EXPERT = re.compile(r"local_experts\.(\d+)\.")


def _expert_offset(model: torch.nn.Module, shape: QwenShape) -> int:
    """Global index of this rank's first local expert."""
    from megatron.core import parallel_state

    if not shape.num_experts:
        return 0
    ep = parallel_state.get_expert_model_parallel_world_size()
    return parallel_state.get_expert_model_parallel_rank() * (shape.num_experts // ep)


def _global_name(name: str, offset: int) -> str:
    return _LOCAL_EXPERT.sub(lambda m: f"local_experts.{int(m.group(1)) + offset}.", name)


def _tp_group(name: str) -> Any:
    from megatron.core import parallel_state

    if "local_experts" in name:
        return parallel_state.get_expert_tensor_parallel_group()
    return parallel_state.get_tensor_model_parallel_group()


def _is_gated_fc1(name: str) -> bool:
    return name.endswith("linear_fc1.weight")


def shard(name: str, param: torch.Tensor, full: torch.Tensor) -> torch.Tensor:
    """This rank's slice of the whole tensor ``full`` of parameter ``name``."""
    if not getattr(param, "tensor_model_parallel", False):
        return full
    group = _tp_group(name)
    size, rank = group.size(), group.rank()
    if size == 1:
        return full
    if _is_gated_fc1(name):
        gate, up = full.chunk(2, 0)
        return torch.cat([gate.chunk(size, 0)[rank], up.chunk(size, 0)[rank]], 0)
    return full.chunk(size, param.partition_dim)[rank]  # type: ignore[attr-defined]


@torch.no_grad()
def load_hf(model: torch.nn.Module, hf: Mapping[str, torch.Tensor], shape: QwenShape) -> None:
    """Copy each parameter's slice of the HF checkpoint ``hf`` into ``model``."""
    offset = _expert_offset(model, shape)
    for name, param in model.named_parameters():
        full = param_from_hf(_global_name(name, offset), hf, shape)
        part = shard(name, param, full)
        if part.shape != param.shape:
            raise ValueError(
                f"{name}: checkpoint slice {tuple(part.shape)} != {tuple(param.shape)}"
            )
        param.copy_(part)


def _all_gather(t: torch.Tensor, group: Any, dim: int) -> list[torch.Tensor]:
    import torch.distributed as dist

    size = group.size()
    if size == 1:
        return [t]
    wire = t.float() if t.device.type == "cpu" and t.dtype != torch.float32 else t  # gloo: fp32
    parts = [torch.empty_like(wire) for _ in range(size)]
    dist.all_gather(parts, wire.contiguous(), group=group)
    return [p.to(t.dtype) for p in parts]


def gather(name: str, param: torch.Tensor) -> torch.Tensor:
    """The whole tensor of this rank's parameter ``name`` (a collective over its TP group)."""
    t = param.detach()
    if not getattr(param, "tensor_model_parallel", False):
        return t
    group, dim = _tp_group(name), param.partition_dim  # type: ignore[attr-defined]
    if _is_gated_fc1(name):
        gates, ups = zip(*(p.chunk(2, 0) for p in _all_gather(t, group, 0)), strict=True)
        return torch.cat([*gates, *ups], 0)
    return torch.cat(_all_gather(t, group, dim), dim)


def hf_buckets(
    model: torch.nn.Module, shape: QwenShape, bucket_bytes: int
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The model's weights as HF Qwen3 tensors in buckets of about ``bucket_bytes`` (a bucket
    holds at least one parameter's tensors); empty buckets on every rank but rank 0."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    lead = dist.get_rank() == 0
    ep = parallel_state.get_expert_model_parallel_world_size() if shape.num_experts else 1
    per_rank = shape.num_experts // ep if shape.num_experts else 0
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, param in model.named_parameters():
        full = gather(name, param)
        if "local_experts" in name and ep > 1:
            group = parallel_state.get_expert_model_parallel_group()
            pieces = [(per_rank * r, t) for r, t in enumerate(_all_gather(full, group, 0))]
        else:
            pieces = [(_expert_offset(model, shape), full)]
        tensors = [hf for off, t in pieces for hf in param_to_hf(name, t, shape, off)]
        nbytes = sum(t.numel() * t.element_size() for _, t in tensors)
        if size and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        if lead:
            bucket += [(n, t.contiguous()) for n, t in tensors]
        size += nbytes
    if size:
        yield bucket
