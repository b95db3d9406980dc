"""The Megatron-core ``GPTModel`` the trainer builds, and the log-probs it reads from it.

The model uses Megatron's local layer spec (no Transformer Engine needed) with two changes: its
core attention is :class:`SDPAttention`, PyTorch's ``scaled_dot_product_attention`` (flash /
memory-efficient kernels on GPUs), where the local spec's ``DotProductAttention`` writes the
whole ``[batch x heads x seq x seq]`` score matrix; its norms are :class:`QwenRMSNorm`, which
allow sequence parallelism (the local spec's torch norms refuse it). Rows are right-padded and attention is
causal, so a padded row's real tokens never see its padding: no attention mask is needed.

:func:`vocab_parallel_logprobs` gives each token's log-prob and the entropy from logits split
over the vocabulary across tensor-parallel ranks, with the gradient of each rank's share.

On CPU (tests, gloo worlds) :func:`install_cpu_shim` answers megatron-core's hard-coded CUDA
calls: ``torch.cuda.current_device()`` (where megatron-core allocates) gives the CPU, and its
RNG tracker (activation recomputation) saves and restores the CPU generator.
"""

from __future__ import annotations

from typing import Any

import torch

from spade_train.backends.megatron_map import (
    ParallelSettings,
    QwenShape,
    rotary_base,
    transformer_config_kwargs,
)

_SHIMMED: set[str] = set()


def install_compat() -> None:
    """megatron-core 0.16 without Transformer Engine names ``te_general_gemm`` in the MoE router
    although its failed import never defined it (``NameError``; 0.19 defines it as None)."""
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None


def install_cpu_shim() -> None:
    """Let megatron-core run in a CPU-only process (see the module doc); idempotent."""
    if "cpu" in _SHIMMED:
        return
    from megatron.core.tensor_parallel import random as mrandom

    torch.cuda.current_device = lambda: torch.device("cpu")  # type: ignore[assignment,return-value]
    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    _SHIMMED.add("cpu")


def seed_cpu_rng_tracker(seed: int) -> None:
    """On CPU, the states megatron-core's ``model_parallel_cuda_manual_seed`` would add to its
    RNG tracker (same seeds per rank), as CPU generator states."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.random import get_cuda_rng_tracker

    tracker = get_cuda_rng_tracker()
    tracker.reset()
    tp, ep, etp = (ps.get_tensor_model_parallel_rank(), ps.get_expert_model_parallel_rank(),
                   ps.get_expert_tensor_parallel_rank())  # fmt: skip
    for name, value in (("data-parallel-rng", seed), ("model-parallel-rng", seed + 2718 + tp),
                        ("expert-parallel-rng", seed + 1024 + 100 * ep + etp)):  # fmt: skip
        tracker.states_[name] = torch.Generator().manual_seed(value).get_state()
        tracker.seeds_.add(value)


def _sdpa_class() -> type:
    from megatron.core.transformer.module import MegatronModule

    class SDPAttention(MegatronModule):
        """Causal core attention through ``torch.nn.functional.scaled_dot_product_attention``;
        the constructor and ``forward`` take what Megatron passes its core attention."""

        def __init__(self, config: Any, layer_number: int, attn_mask_type: Any,
                     attention_type: str, attention_dropout: float | None = None,
                     softmax_scale: float | None = None, **_: Any) -> None:  # fmt: skip
            super().__init__(config=config)
            from megatron.core import parallel_state

            tp = parallel_state.get_tensor_model_parallel_world_size()
            self.heads = config.num_attention_heads // tp
            self.groups = config.num_query_groups // tp
            self.scale = softmax_scale

        def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: Any, attn_mask_type: Any = None, attention_bias: Any = None,
                    packed_seq_params: Any = None) -> torch.Tensor:  # fmt: skip
            # [seq, batch, heads, dim] -> [batch, heads, seq, dim]
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            if self.heads != self.groups:
                k = k.repeat_interleave(self.heads // self.groups, 1)
                v = v.repeat_interleave(self.heads // self.groups, 1)
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.scale
            )
            return out.permute(2, 0, 1, 3).reshape(query.shape[0], query.shape[1], -1)

    return SDPAttention


class QwenRMSNorm(torch.nn.Module):
    """Qwen3's RMSNorm (normalised in float32, cast back, then scaled) with the signature
    megatron-core builds norms with. Unlike the local spec's torch norm it allows sequence
    parallelism (its weight is marked, so its gradient is summed over the tensor-parallel
    group) and keeps its weight in the model's dtype."""

    def __init__(self, config: Any, hidden_size: int, eps: float = 1e-6, **_: Any) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype))
        self.weight.sequence_parallel = config.sequence_parallel  # type: ignore[attr-defined]
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * y.to(x.dtype)


def _layer_specs(num_layers: int, num_experts: int) -> Any:
    """The local spec with :class:`QwenRMSNorm` norms and SDPA core attention."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules

    spec = get_gpt_layer_local_spec(num_experts=num_experts or None, qk_layernorm=True)
    layer = spec.submodules
    layer.input_layernorm = layer.pre_mlp_layernorm = QwenRMSNorm
    attention = layer.self_attention.submodules
    attention.q_layernorm = attention.k_layernorm = QwenRMSNorm
    attention.core_attention = _sdpa_class()
    return TransformerBlockSubmodules(layer_specs=[spec] * num_layers, layer_norm=QwenRMSNorm)


def build_model(hf_config: Any, parallel: ParallelSettings, dtype: torch.dtype, device: str,
                recompute: bool) -> torch.nn.Module:  # fmt: skip
    """A ``GPTModel`` with this Qwen3 config, its parameters in ``dtype`` on ``device`` (the
    caller loads a checkpoint into it)."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer import TransformerConfig

    shape = QwenShape.from_hf(hf_config)
    kw = transformer_config_kwargs(hf_config, parallel)
    kw.update(
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        use_cpu_initialization=device == "cpu",
        # initialised although a checkpoint is loaded next: megatron-core marks tensor-parallel
        # parameters (tensor_model_parallel, partition_dim) only in its initialisers
        perform_initialization=True,
        gradient_accumulation_fusion=False,
        # megatron-core's fused SwiGLU is torch.compile'd: a compile (and a C compiler) in every
        # rank process and a recompile per new shape, for one elementwise kernel
        bias_activation_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
    )
    if shape.num_experts:  # all-to-all on GPUs (megatron-core's needs CUDA streams)
        kw["moe_token_dispatcher_type"] = "alltoall" if device == "cuda" else "allgather"
    if recompute:  # the whole layer's activations are recomputed in the backward pass
        kw.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    model = GPTModel(
        config=TransformerConfig(**kw),
        transformer_layer_spec=_layer_specs(shape.num_layers, shape.num_experts),
        vocab_size=hf_config.vocab_size,
        max_sequence_length=hf_config.max_position_embeddings,
        share_embeddings_and_output_weights=shape.tied_embeddings,
        position_embedding_type="rope",
        rotary_base=rotary_base(hf_config),
    )
    return model.to(device)


class _VocabParallelLogProbs(torch.autograd.Function):
    """Log-prob of each target and the entropy from vocabulary-parallel logits. Saves only the
    logits (in their own dtype) and two numbers per token; the backward rebuilds the softmax:
    d logp_t / d z_k = [k = t] - p_k and d H / d z_k = -p_k (log p_k + H)."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, group: Any,
                first: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        z = logits.float()
        top = z.max(-1).values
        if group is not None:
            torch.distributed.all_reduce(top, op=torch.distributed.ReduceOp.MAX, group=group)
        shifted = z - top.unsqueeze(-1)
        exp = shifted.exp()
        local = targets - first
        mine = (local >= 0) & (local < z.shape[-1])
        picked = shifted.gather(-1, local.clamp(0, z.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)
        sums = torch.stack([exp.sum(-1), (exp * shifted).sum(-1), picked * mine], -1)
        del z, shifted, exp
        if group is not None:
            torch.distributed.all_reduce(sums, group=group)
        total, weighted, target = sums.unbind(-1)
        log_total = total.log()
        logp, entropy = target - log_total, log_total - weighted / total
        ctx.save_for_backward(logits, local, mine, top + log_total, entropy)
        return logp, entropy

    @staticmethod
    def backward(ctx: Any, g_logp: torch.Tensor, g_entropy: torch.Tensor) -> tuple:  # type: ignore[override]
        logits, local, mine, lse, entropy = ctx.saved_tensors
        log_p = logits.float() - lse.unsqueeze(-1)
        grad = log_p.exp()
        grad *= -(g_logp.unsqueeze(-1) + g_entropy.unsqueeze(-1) * (log_p + entropy.unsqueeze(-1)))
        index = local.clamp(0, logits.shape[-1] - 1).unsqueeze(-1)
        grad.scatter_add_(-1, index, (g_logp * mine).unsqueeze(-1))
        return grad.to(logits.dtype), None, None, None


def vocab_parallel_logprobs(
    logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log-prob of each target, entropy)`` in float32 from ``logits`` ``[..., V / tp]``, this
    rank's slice of the vocabulary (rank r holds ids ``[r V/tp, (r+1) V/tp)``).

    The per-token sums over the vocabulary are all-reduced across the tensor-parallel group;
    every rank then computes the same loss from them, so each rank's slice gets its own part of
    the gradient with no communication in the backward pass."""
    from megatron.core import parallel_state

    tp = parallel_state.get_tensor_model_parallel_world_size()
    group = parallel_state.get_tensor_model_parallel_group() if tp > 1 else None
    first = parallel_state.get_tensor_model_parallel_rank() * logits.shape[-1]
    logp, entropy = _VocabParallelLogProbs.apply(logits, targets, group, first)
    return logp, entropy


def full_logits(logits: torch.Tensor) -> torch.Tensor:
    """The whole vocabulary's logits (gathered across tensor-parallel ranks), for sampling."""
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region

    if parallel_state.get_tensor_model_parallel_world_size() == 1:
        return logits
    return gather_from_tensor_model_parallel_region(logits)
