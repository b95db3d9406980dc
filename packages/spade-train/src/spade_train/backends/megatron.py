"""The ``megatron`` backend: a Megatron-core ``GPTModel`` trainer for Qwen3 HF checkpoints.

:class:`MegatronBackend` starts the world its options describe
(:func:`~spade_train.backends.megatron_world.world_layout`: one rank in this process, or one
Ray actor per rank) and drives every rank's :class:`~spade_train.backends.megatron_rank.
MegatronRank` at once. The update is the local backend's loss (KL against the initial
weights, truncated importance sampling against the rollout engine's log-probs, entropy,
micro-batches normalised by the whole batch), in the recipe's ``dtype`` with float32 master
weights, with activation recomputation under ``gradient_checkpointing``.

Weights leave as HF Qwen3 tensors in buckets (:meth:`MegatronBackend.export_hf_buckets`, for
SGLang's in-memory updates), or as a HF checkpoint directory (:meth:`~MegatronBackend.save_hf`);
they come in from one (:meth:`~MegatronBackend.load_hf`). The name mapping lives in
:mod:`~spade_train.backends.megatron_map` (its names are re-exported here).

Runs on GPUs (NCCL); on CPU (gloo) for small models and tests.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from spade_train.backends.megatron_map import (
    ParallelSettings,
    QwenShape,
    hf_to_megatron,
    local_to_te,
    megatron_to_hf,
    param_from_hf,
    param_to_hf,
    rotary_base,
    te_to_local,
    transformer_config_kwargs,
)
from spade_train.backends.megatron_rank import MegatronRank
from spade_train.backends.megatron_world import (
    InProcessRanks,
    RankGroup,
    RayRanks,
    WorldLayout,
    import_megatron,
    resolve_device,
    world_layout,
)
from spade_train.errors import BackendError
from spade_train.types import Generation, Message, SamplingParams, TrainSample

__all__ = [
    "MegatronBackend",
    "ParallelSettings",
    "QwenShape",
    "WorldLayout",
    "hf_to_megatron",
    "local_to_te",
    "megatron_to_hf",
    "param_from_hf",
    "param_to_hf",
    "rotary_base",
    "te_to_local",
    "transformer_config_kwargs",
    "world_layout",
]

_RANK_OPTIONS = frozenset(inspect.signature(MegatronRank.__init__).parameters) - {"self", "env"}
DEFAULT_BUCKET_BYTES = 512 * 2**20


class MegatronBackend:
    """Options: ``model`` (a HF Qwen3 directory), the shared training options (``dtype``,
    ``lr``, ``micro_batch_size``, ``kl_coef``, ``tis_clip``, ...), ``tensor_parallel``,
    ``pipeline_parallel`` (1 only), ``expert_parallel``, ``sequence_parallel``,
    ``world_size`` (default tp x pp x ep), ``device`` (auto / cuda / cpu); from the ray
    backend also ``placement_group`` and ``bundle_indices`` (one bundle per rank)."""

    name = "megatron"

    def __init__(self, model: str, *, world_size: int | None = None, tensor_parallel: int = 1,
                 pipeline_parallel: int = 1, expert_parallel: int = 1,
                 sequence_parallel: bool = False, device: str = "auto",
                 cpus_per_rank: float = 1.0, call_timeout_s: float = 3600.0,
                 placement_group: Any = None, bundle_indices: Sequence[int] | None = None,
                 lora: dict[str, Any] | None = None, **options: Any) -> None:  # fmt: skip
        if lora:
            raise BackendError("the megatron backend trains all weights (no LoRA); "
                               "set backend.lora: null or use the local backend")  # fmt: skip
        unknown = sorted(set(options) - _RANK_OPTIONS)
        if unknown:
            raise BackendError(f"megatron backend: unknown option(s) {', '.join(unknown)}; "
                               "remove them from backend.options")  # fmt: skip
        import_megatron()
        self.layout = world_layout(
            {
                "tensor_parallel": tensor_parallel,
                "pipeline_parallel": pipeline_parallel,
                "expert_parallel": expert_parallel,
                "sequence_parallel": sequence_parallel,
                "world_size": world_size,
            }  # fmt: skip
        )
        self.device = resolve_device(device)
        if self.device == "cuda" and self.layout.world_size == 1 and placement_group is None:
            if not torch.cuda.is_available():
                raise BackendError(
                    "megatron backend: device cuda but no CUDA GPU is visible; "
                    "use device: cpu (small models) or a GPU machine"
                )
        self.model_path = model
        make = functools.partial(MegatronRank, layout=self.layout, device=self.device,
                                 model=model, **options)  # fmt: skip
        self.ranks: RankGroup
        if self.layout.world_size == 1 and placement_group is None:
            self.ranks = InProcessRanks(make)
        else:
            self.ranks = RayRanks(self.layout, make, self.device, cpus_per_rank, call_timeout_s,
                                  placement_group, bundle_indices)  # fmt: skip
        self.steps = 0

    @property
    def rank0(self) -> MegatronRank | None:
        """Rank 0's trainer when the world runs in this process (tests, one GPU), else None."""
        rank = getattr(self.ranks, "rank", None)
        return rank if isinstance(rank, MegatronRank) else None

    # -- the PolicyBackend interface --------------------------------------------------------
    def generate(self, conversations: Sequence[Sequence[Message]], params: SamplingParams,
                 tools: Sequence[Sequence[dict[str, Any]] | None] | None = None) -> list[Generation]:  # fmt: skip
        """Every rank samples every conversation (same seed, same tokens); rank 0's answer."""
        if tools is not None and len(tools) != len(conversations):
            raise BackendError(f"tools has {len(tools)} entries for {len(conversations)} chats")
        return self.ranks.call("generate", list(conversations), params, tools)[0]

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        out = self.ranks.call("train_step", list(samples))[0]
        self.steps += 1
        return out

    def logprobs(self, rows: list[list[int]]) -> list[list[float]]:
        """Each token's log-prob under the current weights (0 for a row's first token)."""
        return self.ranks.call("logprobs", rows)[0]

    def publish_weights(self) -> None:
        """Generation here uses the trained model itself: nothing to push (an SGLang engine
        takes :meth:`export_hf_buckets`)."""

    # -- weights ----------------------------------------------------------------------------
    def export_hf_buckets(
        self, bucket_bytes: int = DEFAULT_BUCKET_BYTES
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """The current weights as HF Qwen3 ``(name, tensor)`` pairs, whole (gathered over the
        tensor- and expert-parallel ranks), in buckets of about ``bucket_bytes``, in the
        model's dtype. A world in this process yields tensors on its device, a Ray world on
        the CPU. Consume a generator to its end before the next train step."""
        self.ranks.call("export_begin", int(bucket_bytes))
        while True:
            got = self.ranks.call("export_next")[0]
            if got is None:
                return
            yield got

    def push_hf_buckets(
        self,
        sink: Callable[[list[tuple[str, torch.Tensor]]], None],
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ) -> int:
        """The same buckets handed to ``sink`` inside rank 0's process, the tensors on its GPU
        (no copy to the CPU or through Ray's object store): for an update over a process group
        that rank 0 joins (SGLang's ``update_weights_from_distributed``). ``sink`` must pickle
        (it travels to the rank); state it keeps between calls lives in that process. Returns
        the number of tensors pushed."""
        return int(self.ranks.call("push_buckets", sink, int(bucket_bytes))[0])

    def load_hf(self, path: str | Path) -> None:
        """Replace the weights with those of the HF checkpoint directory ``path`` (every rank
        reads its own slice; the path must be readable on every rank's node)."""
        self.ranks.call("load_hf_path", str(path))

    def save_hf(self, path: str | Path, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        """Write the weights as a HF checkpoint directory (safetensors shards, index, config,
        tokenizer), into a temporary directory renamed at the end."""
        from safetensors.torch import save_file
        from transformers import AutoConfig, AutoTokenizer

        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        weight_map, total = {}, 0
        for i, bucket in enumerate(self.export_hf_buckets(bucket_bytes)):
            name = f"model-{i + 1:05d}.safetensors"
            tensors = {k: v.detach().cpu().contiguous() for k, v in bucket}
            save_file(tensors, str(tmp / name), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(tensors, name))
            total += sum(v.numel() * v.element_size() for v in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
        AutoConfig.from_pretrained(self.model_path).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(self.model_path).save_pretrained(tmp)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)

    # -- checkpoints ------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Every rank writes its shard (weights, float32 copies, optimizer) into ``path``
        (written as a temporary directory, then renamed; shared storage across nodes)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.ranks.call("save_shard", str(tmp))
        meta = {"layout": self.layout.plan(), "steps": self.steps, "model": self.model_path}
        (tmp / "megatron.json").write_text(json.dumps(meta, indent=1))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote (the same world layout only)."""
        meta_file = Path(path) / "megatron.json"
        if not meta_file.exists():
            raise BackendError(
                f"{path} is not a megatron-backend checkpoint (megatron.json missing)"
            )
        meta = json.loads(meta_file.read_text())
        if meta["layout"] != self.layout.plan():
            raise BackendError(
                f"{path} was saved by a world {meta['layout']['parallel']} of "
                f"{meta['layout']['world_size']} ranks; this one is {self.layout.plan()['parallel']} "
                f"of {self.layout.world_size}: resume with the same parallel options"
            )
        self.ranks.call("load_shard", str(path))
        self.steps = int(meta["steps"])

    def close(self) -> None:
        self.ranks.close()
