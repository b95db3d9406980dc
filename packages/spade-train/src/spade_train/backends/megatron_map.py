"""HF ⇄ Megatron-core names and shapes for Qwen3 / Qwen3-MoE (pure tensor mapping, no megatron import).

Between a Hugging Face Qwen3 / Qwen3-MoE ``state_dict`` and Megatron-core ``GPTModel`` names with the
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

The model the backend builds uses Megatron's *local* layer spec (no Transformer Engine), where
the two fused norms are modules of their own (``input_layernorm``, ``pre_mlp_layernorm``):
:func:`te_to_local` / :func:`local_to_te` rename between the two, and :func:`param_to_hf`
converts one whole (tensor-parallel gathered) local-spec parameter, which is what the bucketed
weight export streams.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spade_train.errors import BackendError


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


def _hf_expert(
    state: Mapping[str, torch.Tensor], h: str, e: int
) -> tuple[torch.Tensor, torch.Tensor]:
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


_TE_LOCAL = (
    ("self_attention.linear_qkv.layer_norm_weight", "input_layernorm.weight"),
    ("mlp.linear_fc1.layer_norm_weight", "pre_mlp_layernorm.weight"),
)


def te_to_local(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformer-Engine names → the local (non-TE) layer spec, where norms are modules."""
    out = {}
    for k, v in state.items():
        for te, local in _TE_LOCAL:
            if k.endswith(te):
                k = k[: -len(te)] + local
        out[k] = v
    return out


def local_to_te(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`te_to_local` for dense layers (MoE keeps ``pre_mlp_layernorm``)."""
    out = dict(state)
    for k in list(state):
        if k.endswith("input_layernorm.weight"):
            out[k.replace("input_layernorm.weight", _TE_LOCAL[0][0])] = out.pop(k)
        elif k.endswith("pre_mlp_layernorm.weight") and not any(
            x.startswith(k.rsplit("pre_mlp", 1)[0] + "mlp.router") for x in state
        ):
            out[k.replace("pre_mlp_layernorm.weight", _TE_LOCAL[1][0])] = out.pop(k)
    return out


_GLOBAL_HF = {
    "embedding.word_embeddings.weight": "model.embed_tokens.weight",
    "output_layer.weight": "lm_head.weight",
    "decoder.final_layernorm.weight": "model.norm.weight",
}
_LAYER_HF = {
    "input_layernorm.weight": "input_layernorm.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "self_attention.q_layernorm.weight": "self_attn.q_norm.weight",
    "self_attention.k_layernorm.weight": "self_attn.k_norm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
    "mlp.router.weight": "mlp.gate.weight",
}
_MEGA_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^mlp\.experts\.local_experts\.(\d+)\.(linear_fc1|linear_fc2)\.weight$")


def param_to_hf(
    name: str, full: torch.Tensor, shape: QwenShape, expert_offset: int = 0
) -> list[tuple[str, torch.Tensor]]:
    """One whole local-spec GPTModel parameter as HF Qwen3 tensors (per-expert layout for MoE,
    as in the released checkpoint files and as SGLang loads them). ``expert_offset``: the
    global index of this rank's local expert 0 under expert parallelism."""
    if name in _GLOBAL_HF:
        return [(_GLOBAL_HF[name], full)]
    m = _MEGA_LAYER.match(name)
    if m is None:
        raise BackendError(f"megatron export: no HF name for parameter {name!r}")
    h, rest = f"model.layers.{m.group(1)}.", m.group(2)
    if rest in _LAYER_HF:
        return [(h + _LAYER_HF[rest], full)]
    if rest == "self_attention.linear_qkv.weight":
        g, hpg, d = shape.num_kv_heads, shape.num_heads // shape.num_kv_heads, shape.head_dim
        hidden = full.shape[1]
        q, k, v = full.reshape(g, (hpg + 2) * d, hidden).split([hpg * d, d, d], 1)
        return [
            (h + "self_attn.q_proj.weight", q.reshape(-1, hidden)),
            (h + "self_attn.k_proj.weight", k.reshape(-1, hidden)),
            (h + "self_attn.v_proj.weight", v.reshape(-1, hidden)),
        ]
    if rest == "mlp.linear_fc1.weight":
        gate, up = full.chunk(2, 0)
        return [(h + "mlp.gate_proj.weight", gate), (h + "mlp.up_proj.weight", up)]
    e = _EXPERT.match(rest)
    if e is not None:
        p = h + f"mlp.experts.{int(e.group(1)) + expert_offset}."
        if e.group(2) == "linear_fc2":
            return [(p + "down_proj.weight", full)]
        gate, up = full.chunk(2, 0)
        return [(p + "gate_proj.weight", gate), (p + "up_proj.weight", up)]
    raise BackendError(f"megatron export: no HF name for parameter {name!r}")


def param_from_hf(name: str, hf: Mapping[str, torch.Tensor], shape: QwenShape) -> torch.Tensor:
    """The whole local-spec GPTModel parameter ``name`` (global expert indices) read from a HF
    Qwen3 state (dense, or MoE in either expert layout): the inverse of :func:`param_to_hf`,
    reading only the HF tensors this parameter needs."""
    if name in _GLOBAL_HF:
        return hf[_GLOBAL_HF[name]]
    m = _MEGA_LAYER.match(name)
    if m is None:
        raise BackendError(f"megatron import: no HF tensor for parameter {name!r}")
    h, rest = f"model.layers.{m.group(1)}.", m.group(2)
    if rest in _LAYER_HF:
        return hf[h + _LAYER_HF[rest]]
    if rest == "self_attention.linear_qkv.weight":
        g, hpg, d = shape.num_kv_heads, shape.num_heads // shape.num_kv_heads, shape.head_dim
        q = hf[h + "self_attn.q_proj.weight"]
        k = hf[h + "self_attn.k_proj.weight"]
        v = hf[h + "self_attn.v_proj.weight"]
        hidden = q.shape[1]
        qkv = torch.cat(
            [q.reshape(g, hpg * d, hidden), k.reshape(g, d, hidden), v.reshape(g, d, hidden)], 1
        )
        return qkv.reshape(-1, hidden)
    if rest == "mlp.linear_fc1.weight":
        return torch.cat([hf[h + "mlp.gate_proj.weight"], hf[h + "mlp.up_proj.weight"]], 0)
    e = _EXPERT.match(rest)
    if e is not None:
        fc1, fc2 = _hf_expert(hf, h, int(e.group(1)))
        return fc1 if e.group(2) == "linear_fc1" else fc2
    raise BackendError(f"megatron import: no HF tensor for parameter {name!r}")


class HFCheckpoint(Mapping[str, torch.Tensor]):
    """The tensors of a HF checkpoint directory's safetensors files, each read when asked for
    (a rank reads only what its shard needs, not the whole model)."""

    def __init__(self, path: str | Path) -> None:
        import json

        root = Path(path)
        index = root / "model.safetensors.index.json"
        if index.exists():
            weight_map = json.loads(index.read_text())["weight_map"]
            self.files = {k: root / f for k, f in weight_map.items()}
        elif (root / "model.safetensors").exists():
            from safetensors import safe_open

            with safe_open(str(root / "model.safetensors"), "pt") as f:
                self.files = dict.fromkeys(f.keys(), root / "model.safetensors")
        else:
            raise BackendError(f"{root}: no model.safetensors(.index.json); save it with "
                               "save_pretrained(safe_serialization=True)")  # fmt: skip

    def __getitem__(self, key: str) -> torch.Tensor:
        from safetensors import safe_open

        if key not in self.files:
            raise KeyError(key)
        with safe_open(str(self.files[key]), "pt") as f:
            return f.get_tensor(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)
