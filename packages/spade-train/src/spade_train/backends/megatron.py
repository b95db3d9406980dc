"""Megatron-core integration: HF ⇄ Megatron checkpoint mapping for Qwen3 and a training step.

The conversion functions are pure tensor-name/shape mappings (CPU, no megatron import) between a
Hugging Face Qwen3 / Qwen3-MoE ``state_dict`` and Megatron-core ``GPTModel`` names with the
Transformer-Engine layer spec (layer norms fused into ``linear_qkv`` / ``linear_fc1``):

==============================================  ==============================================
HF                                              Megatron-core
==============================================  ==============================================
model.embed_tokens.weight                       embedding.word_embeddings.weight
layers.i.input_layernorm.weight                 decoder.layers.i.self_attention.linear_qkv.layer_norm_weight
layers.i.self_attn.{q,k,v}_proj.weight          decoder.layers.i.self_attention.linear_qkv.weight (per group: q…, k, v)
layers.i.self_attn.o_proj.weight                decoder.layers.i.self_attention.linear_proj.weight
layers.i.self_attn.{q,k}_norm.weight            decoder.layers.i.self_attention.{q,k}_layernorm.weight
layers.i.post_attention_layernorm.weight        dense: …mlp.linear_fc1.layer_norm_weight; MoE: …pre_mlp_layernorm.weight
layers.i.mlp.{gate,up}_proj / down_proj         …mlp.linear_fc1.weight (cat gate, up) / …mlp.linear_fc2.weight
layers.i.mlp.gate.weight (MoE router)           …mlp.router.weight
layers.i.mlp.experts (fused or per expert)      …mlp.experts.local_experts.e.linear_fc{1,2}.weight
model.norm.weight / lm_head.weight              decoder.final_layernorm.weight / output_layer.weight
==============================================  ==============================================

:class:`MegatronBackend` trains a ``GPTModel`` with tensor/pipeline/expert parallel settings from
its options and computes the same loss as the local backend (``spade_train.loss.policy_loss``).
It needs megatron-core and a CUDA GPU; both are imported lazily.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spade_train.backends.render import render_prompt
from spade_train.errors import BackendError
from spade_train.types import Generation, Message, SamplingParams, TrainSample

INSTALL_HINT = (
    "install megatron-core and transformer-engine on a GPU machine: pip install megatron-core"
)


@dataclass(frozen=True)
class QwenShape:
    """The config facts the mapping needs (read from a transformers Qwen3/Qwen3-MoE config)."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_experts: int = 0
    tied_embeddings: bool = False

    @classmethod
    def from_hf(cls, config: Any) -> QwenShape:
        """Read the shape from a ``Qwen3Config`` / ``Qwen3MoeConfig``."""
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        return cls(
            num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads,
            num_kv_heads=config.num_key_value_heads,
            head_dim=head_dim,
            num_experts=int(getattr(config, "num_experts", 0) or 0),
            tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        )


@dataclass(frozen=True)
class ParallelSettings:
    """Megatron parallel layout; ``world_size`` must be a multiple of ``tp * pp``."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    sequence_parallel: bool = False

    @classmethod
    def from_options(cls, options: dict[str, Any], world_size: int = 1) -> ParallelSettings:
        """Read ``tensor_parallel``/``pipeline_parallel``/``expert_parallel`` from options."""
        s = cls(
            tp=int(options.get("tensor_parallel", 1)),
            pp=int(options.get("pipeline_parallel", 1)),
            ep=int(options.get("expert_parallel", 1)),
            sequence_parallel=bool(options.get("sequence_parallel", False)),
        )
        if min(s.tp, s.pp, s.ep) < 1:
            raise BackendError(f"parallel sizes must be >= 1, got tp={s.tp} pp={s.pp} ep={s.ep}")
        if world_size % (s.tp * s.pp):
            raise BackendError(
                f"world size {world_size} is not a multiple of tensor_parallel*pipeline_parallel="
                f"{s.tp * s.pp}; change backend.options"
            )
        if (world_size // (s.tp * s.pp)) % s.ep:
            raise BackendError(
                f"expert_parallel={s.ep} must divide the data-parallel size "
                f"{world_size // (s.tp * s.pp)}"
            )
        return s


_HF_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


def hf_to_megatron(state: dict[str, torch.Tensor], shape: QwenShape) -> dict[str, torch.Tensor]:
    """Map a HF Qwen3 (dense or MoE) ``state_dict`` to Megatron-core GPTModel names."""
    out: dict[str, torch.Tensor] = {
        "embedding.word_embeddings.weight": state["model.embed_tokens.weight"],
        "decoder.final_layernorm.weight": state["model.norm.weight"],
    }
    if not shape.tied_embeddings:
        out["output_layer.weight"] = state["lm_head.weight"]
    g, hpg, d = shape.num_kv_heads, shape.num_heads // shape.num_kv_heads, shape.head_dim
    for i in range(shape.num_layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        q = state[h + "self_attn.q_proj.weight"]
        k = state[h + "self_attn.k_proj.weight"]
        v = state[h + "self_attn.v_proj.weight"]
        hidden = q.shape[1]
        qkv = torch.cat(
            [q.reshape(g, hpg * d, hidden), k.reshape(g, d, hidden), v.reshape(g, d, hidden)], 1
        )
        out[m + "self_attention.linear_qkv.weight"] = qkv.reshape(-1, hidden)
        out[m + "self_attention.linear_qkv.layer_norm_weight"] = state[h + "input_layernorm.weight"]
        out[m + "self_attention.linear_proj.weight"] = state[h + "self_attn.o_proj.weight"]
        out[m + "self_attention.q_layernorm.weight"] = state[h + "self_attn.q_norm.weight"]
        out[m + "self_attention.k_layernorm.weight"] = state[h + "self_attn.k_norm.weight"]
        post = state[h + "post_attention_layernorm.weight"]
        if shape.num_experts:
            out[m + "pre_mlp_layernorm.weight"] = post
            out[m + "mlp.router.weight"] = state[h + "mlp.gate.weight"]
            for e in range(shape.num_experts):
                fc1, fc2 = _hf_expert(state, h, e)
                out[m + f"mlp.experts.local_experts.{e}.linear_fc1.weight"] = fc1
                out[m + f"mlp.experts.local_experts.{e}.linear_fc2.weight"] = fc2
        else:
            out[m + "mlp.linear_fc1.layer_norm_weight"] = post
            out[m + "mlp.linear_fc1.weight"] = torch.cat(
                [state[h + "mlp.gate_proj.weight"], state[h + "mlp.up_proj.weight"]], 0
            )
            out[m + "mlp.linear_fc2.weight"] = state[h + "mlp.down_proj.weight"]
    _check_used(state, shape)
    return out


def _hf_expert(state: dict[str, torch.Tensor], h: str, e: int) -> tuple[torch.Tensor, torch.Tensor]:
    fused = h + "mlp.experts.gate_up_proj"
    if fused in state:  # transformers 5 layout: (E, 2I, H) and (E, H, I)
        return state[fused][e], state[h + "mlp.experts.down_proj"][e]
    p = h + f"mlp.experts.{e}."  # checkpoint-file layout: one Linear per expert
    fc1 = torch.cat([state[p + "gate_proj.weight"], state[p + "up_proj.weight"]], 0)
    return fc1, state[p + "down_proj.weight"]


def _check_used(state: dict[str, torch.Tensor], shape: QwenShape) -> None:
    for key in state:
        m = _HF_LAYER.match(key)
        if m and int(m.group(1)) >= shape.num_layers:
            raise BackendError(f"HF checkpoint has {key} beyond num_layers={shape.num_layers}")


def megatron_to_hf(
    state: dict[str, torch.Tensor], shape: QwenShape, fused_experts: bool = True
) -> dict[str, torch.Tensor]:
    """Map Megatron-core GPTModel names back to a HF Qwen3 ``state_dict``.

    ``fused_experts``: write MoE experts as transformers-5 fused ``gate_up_proj``/``down_proj``
    tensors (True) or one Linear per expert as in the released checkpoint files (False).
    """
    out: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": state["embedding.word_embeddings.weight"],
        "model.norm.weight": state["decoder.final_layernorm.weight"],
    }
    if not shape.tied_embeddings:
        out["lm_head.weight"] = state["output_layer.weight"]
    g, hpg, d = shape.num_kv_heads, shape.num_heads // shape.num_kv_heads, shape.head_dim
    for i in range(shape.num_layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        qkv = state[m + "self_attention.linear_qkv.weight"]
        hidden = qkv.shape[1]
        q, k, v = qkv.reshape(g, (hpg + 2) * d, hidden).split([hpg * d, d, d], 1)
        out[h + "self_attn.q_proj.weight"] = q.reshape(-1, hidden)
        out[h + "self_attn.k_proj.weight"] = k.reshape(-1, hidden)
        out[h + "self_attn.v_proj.weight"] = v.reshape(-1, hidden)
        out[h + "self_attn.o_proj.weight"] = state[m + "self_attention.linear_proj.weight"]
        out[h + "self_attn.q_norm.weight"] = state[m + "self_attention.q_layernorm.weight"]
        out[h + "self_attn.k_norm.weight"] = state[m + "self_attention.k_layernorm.weight"]
        out[h + "input_layernorm.weight"] = state[m + "self_attention.linear_qkv.layer_norm_weight"]
        if shape.num_experts:
            out[h + "post_attention_layernorm.weight"] = state[m + "pre_mlp_layernorm.weight"]
            out[h + "mlp.gate.weight"] = state[m + "mlp.router.weight"]
            fc1 = [
                state[m + f"mlp.experts.local_experts.{e}.linear_fc1.weight"]
                for e in range(shape.num_experts)
            ]
            fc2 = [
                state[m + f"mlp.experts.local_experts.{e}.linear_fc2.weight"]
                for e in range(shape.num_experts)
            ]
            if fused_experts:
                out[h + "mlp.experts.gate_up_proj"] = torch.stack(fc1)
                out[h + "mlp.experts.down_proj"] = torch.stack(fc2)
            else:
                for e, (w1, w2) in enumerate(zip(fc1, fc2, strict=True)):
                    gate, up = w1.chunk(2, 0)
                    out[h + f"mlp.experts.{e}.gate_proj.weight"] = gate
                    out[h + f"mlp.experts.{e}.up_proj.weight"] = up
                    out[h + f"mlp.experts.{e}.down_proj.weight"] = w2
        else:
            out[h + "post_attention_layernorm.weight"] = state[
                m + "mlp.linear_fc1.layer_norm_weight"
            ]
            gate, up = state[m + "mlp.linear_fc1.weight"].chunk(2, 0)
            out[h + "mlp.gate_proj.weight"] = gate
            out[h + "mlp.up_proj.weight"] = up
            out[h + "mlp.down_proj.weight"] = state[m + "mlp.linear_fc2.weight"]
    return out


def transformer_config_kwargs(hf_config: Any, parallel: ParallelSettings) -> dict[str, Any]:
    """Megatron ``TransformerConfig`` keyword arguments for a HF Qwen3 config.

    Megatron's defaults differ from Qwen3 in two places that change the forward pass without any
    error: its activation is GELU (Qwen3's gated MLP uses SiLU) and its MoE router takes the
    top-k before the softmax, which renormalizes the chosen experts' weights — Qwen3-MoE's
    ``norm_topk_prob=True``; with ``False`` the softmax runs over all experts first.
    """
    shape = QwenShape.from_hf(hf_config)
    act = getattr(hf_config, "hidden_act", "silu")
    if act != "silu":
        raise BackendError(f"megatron mapping: hidden_act={act!r} is not supported (Qwen3: silu)")
    kw: dict[str, Any] = {
        "num_layers": shape.num_layers,
        "hidden_size": hf_config.hidden_size,
        "num_attention_heads": shape.num_heads,
        "num_query_groups": shape.num_kv_heads,
        "kv_channels": shape.head_dim,
        "ffn_hidden_size": hf_config.intermediate_size,
        "normalization": "RMSNorm",
        "layernorm_epsilon": hf_config.rms_norm_eps,
        "gated_linear_unit": True,
        "activation_func": torch.nn.functional.silu,
        "add_bias_linear": False,
        "qk_layernorm": True,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "tensor_model_parallel_size": parallel.tp,
        "pipeline_model_parallel_size": parallel.pp,
        "sequence_parallel": parallel.sequence_parallel,
    }
    if shape.num_experts:
        kw.update(
            num_moe_experts=shape.num_experts,
            moe_router_topk=hf_config.num_experts_per_tok,
            moe_ffn_hidden_size=hf_config.moe_intermediate_size,
            expert_model_parallel_size=parallel.ep,
            moe_router_pre_softmax=not getattr(hf_config, "norm_topk_prob", False),
        )
    return kw


def rotary_base(hf_config: Any) -> int:
    """RoPE's base: ``rope_theta`` (transformers 4) or ``rope_parameters["rope_theta"]`` (5)."""
    theta = getattr(hf_config, "rope_theta", None)
    if theta is None:
        theta = (getattr(hf_config, "rope_parameters", None) or {}).get("rope_theta")
    if theta is None:
        raise BackendError("megatron mapping: the HF config gives no rope_theta")
    return int(theta)


class MegatronBackend:
    """A Megatron-core ``GPTModel`` trainer for Qwen3 HF checkpoints (GPU only).

    ``generate`` runs a plain sampling loop on the Megatron model (small checks only; at scale
    generation goes to SGLang through the ray backend). Options: ``model`` (a HF directory),
    ``lr``, ``weight_decay``, ``grad_clip``, ``clip_eps``, ``clip_eps_high``, ``seed``,
    ``tensor_parallel``, ``pipeline_parallel``, ``expert_parallel``.
    """

    name = "megatron"

    def __init__(self, model: str, lr: float = 1e-5, weight_decay: float = 0.0,
                 grad_clip: float = 1.0, clip_eps: float = 0.2, clip_eps_high: float | None = None,
                 seed: int = 0, **options: Any) -> None:  # fmt: skip
        try:
            from megatron.core import parallel_state, tensor_parallel
            from megatron.core.models.gpt import GPTModel
            from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
            from megatron.core.transformer import TransformerConfig
        except ImportError as exc:
            raise BackendError(f"megatron-core is not importable ({exc}); {INSTALL_HINT}") from exc
        if not torch.cuda.is_available():
            raise BackendError(f"the megatron backend needs a CUDA GPU; {INSTALL_HINT}")
        import torch.distributed as dist
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        if not dist.is_initialized():
            import os

            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29517")
            dist.init_process_group("nccl", rank=0, world_size=1)
        par = ParallelSettings.from_options(options, dist.get_world_size())
        if parallel_state.model_parallel_is_initialized():  # a backend before this one failed
            parallel_state.destroy_model_parallel()
        parallel_state.initialize_model_parallel(par.tp, par.pp, expert_model_parallel_size=par.ep)
        torch.manual_seed(seed)
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
        self.hf_config = AutoConfig.from_pretrained(model)
        self.shape = QwenShape.from_hf(self.hf_config)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        cfg = TransformerConfig(**transformer_config_kwargs(self.hf_config, par),
                                params_dtype=torch.float32)  # fmt: skip
        spec = get_gpt_layer_local_spec(
            num_experts=self.shape.num_experts or None, qk_layernorm=True
        )
        self.model = GPTModel(
            config=cfg, transformer_layer_spec=spec, vocab_size=self.hf_config.vocab_size,
            max_sequence_length=self.hf_config.max_position_embeddings,
            share_embeddings_and_output_weights=self.shape.tied_embeddings,
            position_embedding_type="rope", rotary_base=rotary_base(self.hf_config),
        ).cuda()  # fmt: skip
        hf = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32).state_dict()
        self.load_hf_state(hf)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=weight_decay)
        self.grad_clip, self.clip_eps, self.clip_eps_high = grad_clip, clip_eps, clip_eps_high
        self.step = 0

    def load_hf_state(self, hf_state: dict[str, torch.Tensor]) -> None:
        """Load HF Qwen3 weights into the Megatron model (local spec: norms as separate keys)."""
        mega = _te_to_local(hf_to_megatron(hf_state, self.shape))
        own = self.model.state_dict()
        missing = [k for k in own if k in mega and own[k].shape != mega[k].shape]
        if missing:
            raise BackendError(f"shape mismatch converting the HF checkpoint: {missing[:3]}")
        self.model.load_state_dict({k: mega[k] for k in own if k in mega}, strict=False)

    def hf_state(self) -> dict[str, torch.Tensor]:
        """The current weights under HF names (for SGLang ``update_weights_from_tensor``)."""
        own = {k: v.detach().cpu() for k, v in self.model.state_dict().items() if "_extra" not in k}
        return megatron_to_hf(_local_to_te(own), self.shape)

    def _logprobs(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        logits = self.model(ids, pos, attention_mask=None).float()
        lp = torch.log_softmax(logits[:, :-1], -1)
        tok = lp.gather(-1, ids[:, 1:, None]).squeeze(-1)
        entropy = -(lp.exp() * lp).sum(-1)
        zero = torch.zeros_like(tok[:, :1])
        return torch.cat([zero, tok], 1), torch.cat([zero, entropy], 1)

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One AdamW step on the joint PPO-clip loss (``spade_train.loss.policy_loss``)."""
        from spade_train.loss import policy_loss

        if not samples:
            raise BackendError("train_step got no samples")
        n = max(len(s.input_ids) for s in samples)
        dev = torch.device("cuda")

        def pad(rows: Sequence[Sequence[float]], dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor([[*r, *[0] * (n - len(r))] for r in rows], dtype=dtype, device=dev)

        ids = pad([s.input_ids for s in samples], torch.long)
        mask = pad([s.loss_mask for s in samples], torch.float32)
        old = pad([s.old_logprobs for s in samples], torch.float32)
        adv = torch.tensor([s.advantage for s in samples], device=dev)
        self.model.train()
        self.opt.zero_grad()
        logp, entropy = self._logprobs(ids)
        loss, metrics = policy_loss(logp, old, adv, mask, clip_eps=self.clip_eps,
                                    clip_eps_high=self.clip_eps_high, entropy=entropy)  # fmt: skip
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.opt.step()
        self.step += 1
        out = {k: float(v) for k, v in metrics.items()}
        out.update(loss=float(loss.detach()), grad_norm=float(grad_norm), tokens=float(mask.sum()))
        out.setdefault("clip_frac", 0.0)
        return out

    @torch.no_grad()
    def generate(self, conversations: Sequence[Sequence[Message]], params: SamplingParams,
                 tools: Sequence[Sequence[dict[str, Any]] | None] | None = None) -> list[Generation]:  # fmt: skip
        """Plain temperature sampling, one conversation at a time (for small checks)."""
        gen = torch.Generator(device="cuda")
        gen.manual_seed(params.seed if params.seed is not None else self.step)
        self.model.eval()
        out = []
        tool_list = list(tools) if tools is not None else [None] * len(conversations)
        for conv, tl in zip(conversations, tool_list, strict=True):
            prompt = render_prompt(self.tokenizer, conv, tl, params.enable_thinking)
            ids, lps, finish = list(prompt), [], "length"
            for _ in range(params.max_new_tokens):
                x = torch.tensor([ids], device="cuda")
                pos = torch.arange(len(ids), device="cuda")[None]
                logits = self.model(x, pos, attention_mask=None)[0, -1].float()
                lp = torch.log_softmax(logits, -1)
                probs = torch.softmax(logits / max(params.temperature, 1e-5), -1)
                t = int(torch.multinomial(probs, 1, generator=gen))
                ids.append(t)
                lps.append(float(lp[t]))
                if t == self.tokenizer.eos_token_id:
                    finish = "stop"
                    break
            comp = ids[len(prompt) :]
            text = self.tokenizer.decode(comp, skip_special_tokens=True)
            out.append(Generation(text, prompt, comp, lps, finish))  # type: ignore[arg-type]
        return out

    def save(self, path: Path) -> None:
        """Write model + optimizer state into ``path`` (temp dir, then rename)."""
        import os
        import shutil

        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                    "step": self.step}, tmp / "megatron.pt")  # fmt: skip
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote."""
        state = torch.load(Path(path) / "megatron.pt", map_location="cuda", weights_only=False)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.step = state["step"]

    def publish_weights(self) -> None:
        """Generation uses this model directly: nothing to push."""

    def close(self) -> None:
        """Release the model-parallel groups (the process group stays for the next backend)."""
        from megatron.core import parallel_state

        parallel_state.destroy_model_parallel()


_TE_LOCAL = (
    ("self_attention.linear_qkv.layer_norm_weight", "input_layernorm.weight"),
    ("mlp.linear_fc1.layer_norm_weight", "pre_mlp_layernorm.weight"),
)


def _te_to_local(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformer-Engine names → the local (non-TE) layer spec, where norms are modules."""
    out = {}
    for k, v in state.items():
        for te, local in _TE_LOCAL:
            if k.endswith(te):
                k = k[: -len(te)] + local
        out[k] = v
    return out


def _local_to_te(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`_te_to_local` for dense layers (MoE keeps ``pre_mlp_layernorm``)."""
    out = dict(state)
    for k in list(state):
        if k.endswith("input_layernorm.weight"):
            out[k.replace("input_layernorm.weight", _TE_LOCAL[0][0])] = out.pop(k)
        elif k.endswith("pre_mlp_layernorm.weight") and not any(
            x.startswith(k.rsplit("pre_mlp", 1)[0] + "mlp.router") for x in state
        ):
            out[k.replace("pre_mlp_layernorm.weight", _TE_LOCAL[1][0])] = out.pop(k)
    return out
