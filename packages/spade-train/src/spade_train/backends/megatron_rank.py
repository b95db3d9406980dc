"""One rank of the Megatron trainer: its model shard, optimizer and the update.

The update is the local backend's, computed over a world (``spade_train.loss.policy_loss``
with the same options, normalised by the whole batch's trained tokens):

* samples with advantage 0 are left out when neither KL nor entropy terms are on (they add
  nothing to the gradient); the rest are sorted by length and dealt round-robin to the
  data-parallel ranks, each cutting its share into micro-batches of ``micro_batch_size`` rows
  and at most ``micro_batch_tokens`` padded tokens. Ranks with fewer micro-batches run empty
  ones (a forward and backward with no trained token), so every rank runs the same number of
  forward passes of the same shapes under expert parallelism (which exchanges tokens inside
  each forward);
* log-probs and entropies come from the vocabulary-parallel logits
  (:func:`~spade_train.backends.megatron_model.vocab_parallel_logprobs`); with ``kl_coef`` a
  frozen copy of the initial weights (the reference) gives the reference log-probs, and
  ``tis_clip`` weights each token by the truncated ratio of the trainer's to the rollout
  engine's log-probs (``TrainSample.old_logprobs``), both as in ``policy_loss``;
* gradients accumulate in float32 (``main`` copies of the parameters when ``dtype`` is lower),
  are summed over the data-parallel group (experts: the expert-data-parallel group) and, for
  parameters every tensor-parallel rank holds whole but sees a part of (query/key norms; norms
  under sequence parallelism), over the tensor-parallel group, as megatron-core's
  ``finalize_model_grads`` does; the norm counts each parameter once across the world;
* AdamW on the float32 copies; weight decay spares 1-D parameters (norms), as Megatron does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from spade_train.backends.megatron_generate import generate_batch
from spade_train.backends.megatron_io import hf_buckets, load_hf
from spade_train.backends.megatron_map import HFCheckpoint, QwenShape
from spade_train.backends.megatron_model import build_model, vocab_parallel_logprobs
from spade_train.backends.megatron_world import WorldLayout, init_rank
from spade_train.backends.render import render_prompt
from spade_train.errors import BackendError
from spade_train.loss import policy_loss
from spade_train.types import Generation, Message, SamplingParams, TrainSample

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_SUMMED = ("clip_frac", "approx_kl", "entropy", "tis_mean")


def micro_batches(samples: Sequence[TrainSample], rows: int, tokens: int | None,
                  max_seq_len: int) -> list[list[TrainSample]]:  # fmt: skip
    """Consecutive runs of ``samples`` of at most ``rows`` rows and ``tokens`` padded tokens
    (a row longer than the budget goes alone), as the local backend cuts them."""
    parts: list[list[TrainSample]] = []
    part: list[TrainSample] = []
    longest = 0
    for s in samples:
        width = min(len(s.input_ids), max_seq_len)
        over = tokens is not None and (len(part) + 1) * max(longest, width) > tokens
        if part and (len(part) >= rows or over):
            parts.append(part)
            part, longest = [], 0
        part.append(s)
        longest = max(longest, width)
    return parts + [part] if part else parts


def _trained_tokens(samples: Sequence[TrainSample], max_seq_len: int) -> float:
    return float(sum(sum(s.loss_mask[-max_seq_len:][1:]) for s in samples))


class MegatronRank:
    """The trainer of one rank (made in the rank's own process; see ``megatron_world``)."""

    def __init__(self, env: dict[str, str], *, layout: WorldLayout, device: str, model: str,
                 dtype: str = "auto", lr: float = 1e-5, weight_decay: float = 0.0,
                 grad_clip: float = 1.0, micro_batch_size: int = 4,
                 micro_batch_tokens: int | None = None, clip_eps: float = 0.2,
                 clip_eps_high: float | None = None, kl_coef: float = 0.0,
                 entropy_coef: float = 0.0, max_seq_len: int = 2048, gen_batch_size: int = 16,
                 gradient_checkpointing: bool = False, tis_clip: float | None = None,
                 tis_clip_low: float = 0.0, betas: Sequence[float] = (0.9, 0.999),
                 seed: int = 0) -> None:  # fmt: skip
        self.layout, self.device = layout, torch.device(device)
        self.rank, self.seed = int(env["RANK"]), seed
        self.grad_clip, self.clip_eps, self.clip_eps_high = grad_clip, clip_eps, clip_eps_high
        self.kl_coef, self.entropy_coef = kl_coef, entropy_coef
        self.tis_clip, self.tis_clip_low = tis_clip, tis_clip_low
        self.micro_batch_size = max(1, micro_batch_size)
        self.micro_batch_tokens = micro_batch_tokens
        self.max_seq_len, self.gen_batch_size = max_seq_len, max(1, gen_batch_size)
        self.pad_to = layout.parallel.tp if layout.parallel.sequence_parallel else 1
        self.steps, self.truncated_prompts = 0, 0
        self._export: Iterator[list[tuple[str, torch.Tensor]]] | None = None
        name = ("bfloat16" if device == "cuda" else "float32") if dtype == "auto" else dtype
        if name not in _DTYPES:
            raise BackendError(f"megatron backend: dtype {dtype!r}; use auto, {', '.join(_DTYPES)}")
        self.dtype = _DTYPES[name]
        self._owns_world = init_rank(env, layout, device, seed)
        try:
            self._build(model, gradient_checkpointing)
        except BaseException:
            self.close()  # nothing left behind: groups, process group
            raise
        decay = [m for m in self.main if m.dim() > 1]
        rest = [m for m in self.main if m.dim() <= 1]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
            lr=lr, betas=(float(betas[0]), float(betas[1])), fused=device == "cuda",
        )  # fmt: skip

    def _build(self, model: str, recompute: bool) -> None:
        """The model (and the reference copy under KL) from the HF directory ``model``."""
        from transformers import AutoConfig, AutoTokenizer

        self.hf_config = AutoConfig.from_pretrained(model)
        self.shape = QwenShape.from_hf(self.hf_config)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id or 0
        par, device = self.layout.parallel, self.device.type
        self.model = build_model(self.hf_config, par, self.dtype, device, recompute)
        hf = HFCheckpoint(model)
        load_hf(self.model, hf, self.shape)
        self.ref = None
        if self.kl_coef:
            self.ref = build_model(self.hf_config, par, self.dtype, device, False)
            load_hf(self.ref, hf, self.shape)
            self.ref.eval().requires_grad_(False)
        self.params: list[torch.Tensor] = [p for p in self.model.parameters() if p.requires_grad]
        self.names = [n for n, p in self.model.named_parameters() if p.requires_grad]
        if self.dtype == torch.float32:
            self.main = self.params
        else:
            self.main = [p.detach().float().clone().requires_grad_(True) for p in self.params]

    def describe(self) -> dict[str, Any]:
        """This rank's place in the world: its environment and megatron-core's groups."""
        import os

        from megatron.core import parallel_state as ps

        env = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                               "LOCAL_RANK", "LOCAL_WORLD_SIZE")}  # fmt: skip
        from megatron.core import __version__ as version

        return {"env": env, "backend": dist.get_backend(), "dtype": str(self.dtype),
                "megatron_core": version,
                "tp": (ps.get_tensor_model_parallel_rank(), ps.get_tensor_model_parallel_world_size()),
                "dp": (ps.get_data_parallel_rank(), ps.get_data_parallel_world_size()),
                "ep": (ps.get_expert_model_parallel_rank(), ps.get_expert_model_parallel_world_size()),
                "pp": (ps.get_pipeline_model_parallel_rank(), ps.get_pipeline_model_parallel_world_size()),
                "tp_group": dist.get_process_group_ranks(ps.get_tensor_model_parallel_group()),
                "dp_group": dist.get_process_group_ranks(ps.get_data_parallel_group())}  # fmt: skip

    # -- log-probs ------------------------------------------------------------------------------
    def _logprobs(self, model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pos = torch.arange(ids.shape[1], device=ids.device)[None]
        logits = model(ids, pos, attention_mask=None)
        picked, entropy = vocab_parallel_logprobs(logits[:, :-1], ids[:, 1:])
        zero = torch.zeros_like(picked[:, :1])
        return torch.cat([zero, picked], 1), torch.cat([zero, entropy], 1)

    @torch.no_grad()
    def logprobs(self, rows: list[list[int]]) -> list[list[float]]:
        """Each token's log-prob given the ones before it (0 for the first), no gradient."""
        self.model.eval()
        out = []
        for row in rows:
            width = -(-len(row) // self.pad_to) * self.pad_to
            ids = torch.full((1, width), self.pad_id, dtype=torch.long)
            ids[0, : len(row)] = torch.tensor(row)
            lp, _ = self._logprobs(self.model, ids.to(self.device))
            out.append(lp[0, : len(row)].tolist())
        return out

    # -- training -------------------------------------------------------------------------------
    def _width(self, part: Sequence[TrainSample]) -> int:
        longest = max([min(len(s.input_ids), self.max_seq_len) for s in part] or [2])
        return -(-longest // self.pad_to) * self.pad_to

    def _batch(
        self, part: Sequence[TrainSample], rows: int, width: int
    ) -> tuple[torch.Tensor, ...]:
        """Ids, loss mask, rollout log-probs and advantages, right-padded to ``rows x width``
        (rows cut to their last ``max_seq_len`` tokens; padding rows train nothing)."""
        seqs = [s.input_ids[-self.max_seq_len :] for s in part]
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        mask, old = torch.zeros(rows, width), torch.zeros(rows, width)
        for row, (s, q) in enumerate(zip(part, seqs, strict=False)):
            cut = len(s.input_ids) - len(q)
            mask[row, : len(q)] = torch.tensor(s.loss_mask[cut:], dtype=torch.float)
            old[row, : len(q)] = torch.tensor(s.old_logprobs[cut:], dtype=torch.float)
        for row, q in enumerate(seqs):
            ids[row, : len(q)] = torch.tensor(q)
        mask[:, 0] = 0
        adv = torch.zeros(rows)
        adv[: len(part)] = torch.tensor([s.advantage for s in part])
        return tuple(t.to(self.device) for t in (ids, mask, old, adv))

    def _micro_step(self, part: Sequence[TrainSample], shape: tuple[int, int],
                    normalizer: float) -> tuple[float, dict]:  # fmt: skip
        ids, mask, old, adv = self._batch(part, *shape)
        logp, entropy = self._logprobs(self.model, ids)
        ref = None
        if self.ref is not None:
            with torch.no_grad():
                ref, _ = self._logprobs(self.ref, ids)
        loss, metrics = policy_loss(
            logp, old, adv, mask, clip_eps=self.clip_eps, clip_eps_high=self.clip_eps_high,
            ref_logprobs=ref, kl_coef=self.kl_coef, entropy=entropy,
            entropy_coef=self.entropy_coef, normalizer=normalizer, tis_clip=self.tis_clip,
            tis_clip_low=self.tis_clip_low,
        )  # fmt: skip
        loss.backward()
        if self.main is not self.params:  # float32 accumulation of lower-precision gradients
            for p, m in zip(self.params, self.main, strict=True):
                if p.grad is not None:
                    m.grad.add_(p.grad.float())  # type: ignore[union-attr]
                    p.grad = None
        metrics["tokens"] = float(mask.sum())
        return float(loss.detach()), metrics

    def _my_parts(self, trained: list[TrainSample]) -> list[tuple[list[TrainSample], tuple]]:
        """This data-parallel rank's micro-batches with their ``(rows, width)``. Every rank runs
        as many (empty ones added); under expert parallelism the i-th micro-batch of every rank
        has one shape (megatron-core's all-gather token dispatcher needs equal shapes)."""
        from megatron.core import parallel_state

        dp, me = self.layout.dp, parallel_state.get_data_parallel_rank()
        cut = [micro_batches(trained[r::dp], self.micro_batch_size, self.micro_batch_tokens,
                             self.max_seq_len) for r in range(dp)]  # fmt: skip
        most = max(1, *(len(c) for c in cut))
        cut = [c + [[] for _ in range(most - len(c))] for c in cut]
        if self.layout.parallel.ep > 1:
            shapes = [(max(1, *(len(c[i]) for c in cut)), max(self._width(c[i]) for c in cut))
                      for i in range(most)]  # fmt: skip
        else:
            shapes = [(max(1, len(p)), self._width(p)) for p in cut[me]]
        return list(zip(cut[me], shapes, strict=True))

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        if not samples:
            raise BackendError("train_step got no samples; the cycle produced nothing to train on")
        started = time.perf_counter()
        self.model.train()
        total = _trained_tokens(samples, self.max_seq_len)
        keep_all = bool(self.kl_coef or self.entropy_coef)
        trained = [s for s in samples if keep_all or s.advantage != 0.0]
        trained.sort(key=lambda s: min(len(s.input_ids), self.max_seq_len))
        weight_base = max(1.0, _trained_tokens(trained, self.max_seq_len))
        for p in self.params:
            p.grad = None
        for m in self.main:
            m.grad = torch.zeros_like(m)
        sums = torch.zeros(1 + len(_SUMMED), dtype=torch.float64)
        for part, shape in self._my_parts(trained):
            loss, metrics = self._micro_step(part, shape, max(1.0, total))
            w = metrics["tokens"] / weight_base
            sums += torch.tensor([loss, *(metrics.get(k, 0.0) * w for k in _SUMMED)],
                                 dtype=torch.float64)  # fmt: skip
        grad_norm = self._finish_grads()
        self.opt.step()
        if self.main is not self.params:
            with torch.no_grad():
                for p, m in zip(self.params, self.main, strict=True):
                    p.copy_(m)
        self.steps += 1
        sums = self._dp_sum(sums)
        out = {"loss": float(sums[0]), "grad_norm": grad_norm, "tokens": total,
               **{k: float(v) for k, v in zip(_SUMMED, sums[1:], strict=True)},
               "step": float(self.steps), "step_time_s": time.perf_counter() - started,
               "truncated_prompts": float(self.truncated_prompts),
               "trained_samples": float(len(trained))}  # fmt: skip
        if self.tis_clip is None:
            out.pop("tis_mean")
        for role in ("agent", "designer"):
            mine = [s for s in samples if s.role == role]
            out[f"{role}/tokens"] = float(sum(sum(s.loss_mask) for s in mine))
            out[f"{role}/advantage_mean"] = (
                sum(s.advantage for s in mine) / len(mine) if mine else 0.0
            )
        return out

    def _dp_sum(self, t: torch.Tensor) -> torch.Tensor:
        from megatron.core import parallel_state

        if self.layout.dp > 1:
            dev = t.to(self.device, torch.float32)
            dist.all_reduce(dev, group=parallel_state.get_data_parallel_group())
            return dev.cpu().double()
        return t

    def _finish_grads(self) -> float:
        """Sum the gradients over the groups that share them, clip them; the norm before."""
        from megatron.core import parallel_state as ps
        from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate

        dense: list[torch.Tensor | None] = []
        expert: list[torch.Tensor | None] = []
        tp_shared: list[torch.Tensor | None] = []
        for name, p, m in zip(self.names, self.params, self.main, strict=True):
            (expert if "local_experts" in name else dense).append(m.grad)
            if ("q_layernorm" in name or "k_layernorm" in name) or (
                self.layout.parallel.sequence_parallel and getattr(p, "sequence_parallel", False)
            ):
                tp_shared.append(m.grad)
        _all_reduce(dense, ps.get_data_parallel_group() if self.layout.dp > 1 else None)
        if expert:
            _all_reduce(expert, ps.get_expert_data_parallel_group())
        if self.layout.parallel.tp > 1:
            _all_reduce(tp_shared, ps.get_tensor_model_parallel_group())
        sq_dense = torch.zeros(1, device=self.device)
        sq_expert = torch.zeros(1, device=self.device)
        for name, p, m in zip(self.names, self.params, self.main, strict=True):
            if "local_experts" in name:
                sq_expert += m.grad.float().pow(2).sum()  # type: ignore[union-attr]
            elif param_is_not_tensor_parallel_duplicate(p):
                sq_dense += m.grad.float().pow(2).sum()  # type: ignore[union-attr]
        if self.layout.parallel.tp > 1:
            dist.all_reduce(sq_dense, group=ps.get_tensor_model_parallel_group())
        if expert:
            dist.all_reduce(sq_expert, group=ps.get_expert_tensor_and_model_parallel_group())
        norm = float((sq_dense + sq_expert).sqrt())
        coef = min(1.0, self.grad_clip / (norm + 1e-6))
        if coef < 1.0:
            for m in self.main:
                m.grad.mul_(coef)  # type: ignore[union-attr]
        return norm

    # -- generation -----------------------------------------------------------------------------
    def generate(self, conversations: Sequence[Sequence[Message]], params: SamplingParams,
                 tools: Sequence[Sequence[dict[str, Any]] | None] | None) -> list[Generation]:  # fmt: skip
        if params.balanced_stop:
            raise BackendError("balanced_stop is a local-backend option; the megatron backend "
                               "stops on plain stop strings")  # fmt: skip
        budget = max(16, self.max_seq_len - params.max_new_tokens)
        prompts = []
        for i, conv in enumerate(conversations):
            ids = render_prompt(self.tokenizer, conv, tools[i] if tools else None,
                                params.enable_thinking)  # fmt: skip
            if len(ids) > budget:
                self.truncated_prompts += 1
                ids = ids[-budget:]
            prompts.append(ids)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(params.seed if params.seed is not None else self.seed + self.steps)
        self.model.eval()
        out: list[Generation] = []
        for start in range(0, len(prompts), self.gen_batch_size):
            chunk = prompts[start : start + self.gen_batch_size]
            out += generate_batch(self.model, self.tokenizer, chunk, params, gen, self.pad_to)
        return out

    # -- weights and checkpoints ----------------------------------------------------------------
    def load_hf_path(self, path: str) -> None:
        """Load a HF checkpoint directory into the model (and its float32 copies)."""
        load_hf(self.model, HFCheckpoint(path), self.shape)
        self._sync_main()

    def load_hf_state(self, state: dict[str, torch.Tensor]) -> None:
        load_hf(self.model, state, self.shape)
        self._sync_main()

    @torch.no_grad()
    def _sync_main(self) -> None:
        if self.main is not self.params:
            for p, m in zip(self.params, self.main, strict=True):
                m.copy_(p)

    def export_begin(self, bucket_bytes: int) -> None:
        self._export = hf_buckets(self.model, self.shape, bucket_bytes)

    def export_next(self) -> list[tuple[str, torch.Tensor]] | None:
        """The next bucket (empty on ranks other than 0), None after the last one."""
        if self._export is None:
            raise BackendError("export_next before export_begin")
        return next(self._export, None)

    def push_buckets(self, sink: Any, bucket_bytes: int) -> int:
        """Run ``sink(bucket)`` on rank 0 for every bucket, its tensors on this rank's device;
        the number of tensors pushed (0 on other ranks)."""
        pushed = 0
        for bucket in hf_buckets(self.model, self.shape, bucket_bytes):
            if bucket:
                sink(bucket)
                pushed += len(bucket)
        return pushed

    def save_shard(self, path: str) -> None:
        torch.save({"model": {n: p.detach() for n, p in self.model.named_parameters()},
                    "main": None if self.main is self.params else [m.detach() for m in self.main],
                    "opt": self.opt.state_dict(), "steps": self.steps,
                    "truncated_prompts": self.truncated_prompts,
                    "rng": torch.get_rng_state()}, Path(path) / f"rank-{self.rank:05d}.pt")  # fmt: skip

    @torch.no_grad()
    def load_shard(self, path: str) -> None:
        state = torch.load(Path(path) / f"rank-{self.rank:05d}.pt", map_location=self.device,
                           weights_only=False)  # fmt: skip
        for n, p in self.model.named_parameters():
            p.copy_(state["model"][n])
        if state["main"] is not None and self.main is not self.params:
            for m, saved in zip(self.main, state["main"], strict=True):
                m.copy_(saved)
        self.opt.load_state_dict(state["opt"])
        self.steps, self.truncated_prompts = state["steps"], state["truncated_prompts"]
        torch.set_rng_state(state["rng"].cpu())

    def close(self) -> None:
        """Release megatron-core's groups and, when this rank started it, the process group
        (each holds sockets: worlds made one after another in a process must not pile up)."""
        from megatron.core import parallel_state

        self._export = None
        if parallel_state.model_parallel_is_initialized():
            parallel_state.destroy_model_parallel()
        if self._owns_world and dist.is_initialized():
            dist.destroy_process_group()
            self._owns_world = False


def _all_reduce(grads: list[torch.Tensor | None], group: Any) -> None:
    """Sum ``grads`` over ``group`` in one flat tensor (nothing to do without a group)."""
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    real = [g for g in grads if g is not None]
    if group is None or group.size() == 1 or not real:
        return
    flat = _flatten_dense_tensors(real)
    dist.all_reduce(flat, group=group)
    for g, synced in zip(real, _unflatten_dense_tensors(flat, real), strict=True):
        g.copy_(synced)
