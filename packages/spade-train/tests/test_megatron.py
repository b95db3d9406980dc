"""HF ⇄ Megatron-core mapping for tiny Qwen3 / Qwen3-MoE models, parallel settings, GPU step."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from spade_train.backends import BackendError
from spade_train.backends.megatron import (
    ParallelSettings,
    QwenShape,
    hf_to_megatron,
    megatron_to_hf,
    rotary_base,
    transformer_config_kwargs,
)
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

torch.set_num_threads(1)
SMALL = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=128)  # fmt: skip


def _dense(tied: bool = False) -> tuple[Qwen3Config, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    cfg = Qwen3Config(intermediate_size=48, tie_word_embeddings=tied, **SMALL)
    return cfg, Qwen3ForCausalLM(cfg).state_dict()


def _moe() -> tuple[Qwen3MoeConfig, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(intermediate_size=48, moe_intermediate_size=16, num_experts=4,
                         num_experts_per_tok=2, **SMALL)  # fmt: skip
    return cfg, Qwen3MoeForCausalLM(cfg).state_dict()


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k


def test_dense_round_trip_is_exact_and_qkv_is_grouped():
    cfg, hf = _dense()
    shape = QwenShape.from_hf(cfg)
    mega = hf_to_megatron(hf, shape)
    _same(megatron_to_hf(mega, shape), hf)
    qkv = mega["decoder.layers.1.self_attention.linear_qkv.weight"]
    d = 8
    assert qkv.shape == ((4 + 2 * 2) * d, 32)
    # group 0 = query heads 0-1, then key head 0, then value head 0
    assert torch.equal(qkv[: 2 * d], hf["model.layers.1.self_attn.q_proj.weight"][: 2 * d])
    assert torch.equal(qkv[2 * d : 3 * d], hf["model.layers.1.self_attn.k_proj.weight"][:d])
    assert torch.equal(qkv[3 * d : 4 * d], hf["model.layers.1.self_attn.v_proj.weight"][:d])
    assert torch.equal(qkv[4 * d : 6 * d], hf["model.layers.1.self_attn.q_proj.weight"][2 * d :])
    fc1 = mega["decoder.layers.0.mlp.linear_fc1.weight"]
    assert fc1.shape == (2 * 48, 32)
    assert torch.equal(fc1[48:], hf["model.layers.0.mlp.up_proj.weight"])
    assert "output_layer.weight" in mega


def test_tied_embeddings_have_no_output_layer():
    cfg, hf = _dense(tied=True)
    hf.pop("lm_head.weight", None)
    shape = QwenShape.from_hf(cfg)
    assert shape.tied_embeddings
    mega = hf_to_megatron(hf, shape)
    assert "output_layer.weight" not in mega
    _same(megatron_to_hf(mega, shape), hf)


def test_moe_round_trip_fused_and_per_expert():
    cfg, hf = _moe()
    shape = QwenShape.from_hf(cfg)
    assert shape.num_experts == 4
    mega = hf_to_megatron(hf, shape)
    assert mega["decoder.layers.0.mlp.router.weight"].shape == (4, 32)
    assert mega["decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"].shape == (32, 32)
    assert mega["decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"].shape == (32, 16)
    assert "decoder.layers.0.pre_mlp_layernorm.weight" in mega
    _same(megatron_to_hf(mega, shape), hf)
    # the released checkpoint files store one Linear per expert: that layout round-trips too
    per_expert = megatron_to_hf(mega, shape, fused_experts=False)
    assert per_expert["model.layers.1.mlp.experts.2.gate_proj.weight"].shape == (16, 32)
    _same(megatron_to_hf(hf_to_megatron(per_expert, shape), shape, fused_experts=False), per_expert)
    _same(hf_to_megatron(per_expert, shape), mega)


def test_extra_layers_are_an_error():
    cfg, hf = _dense()
    shape = QwenShape.from_hf(cfg)
    hf["model.layers.7.input_layernorm.weight"] = torch.ones(32)
    with pytest.raises(BackendError, match="beyond num_layers"):
        hf_to_megatron(hf, shape)


def test_parallel_settings_from_options():
    s = ParallelSettings.from_options({"tensor_parallel": 2, "expert_parallel": 2}, world_size=8)
    assert (s.tp, s.pp, s.ep) == (2, 1, 2)
    with pytest.raises(BackendError, match="not a multiple"):
        ParallelSettings.from_options({"tensor_parallel": 3}, world_size=8)
    with pytest.raises(BackendError, match="expert_parallel"):
        ParallelSettings.from_options({"expert_parallel": 3}, world_size=4)
    with pytest.raises(BackendError, match=">= 1"):
        ParallelSettings.from_options({"pipeline_parallel": 0})


def test_transformer_config_kwargs_follow_the_hf_config():
    cfg, _ = _moe()
    kw = transformer_config_kwargs(cfg, ParallelSettings(tp=2, ep=2))
    assert kw["num_query_groups"] == 2 and kw["kv_channels"] == 8 and kw["qk_layernorm"]
    assert kw["num_moe_experts"] == 4 and kw["moe_router_topk"] == 2
    assert kw["moe_ffn_hidden_size"] == 16 and kw["expert_model_parallel_size"] == 2
    assert kw["tensor_model_parallel_size"] == 2
    dense = transformer_config_kwargs(_dense()[0], ParallelSettings())
    assert "num_moe_experts" not in dense and dense["ffn_hidden_size"] == 48


def test_the_activation_and_router_match_qwen3_not_megatron_defaults():
    # Megatron's defaults (GELU; top-k before the softmax) gave logits off by ~1e-2 on a
    # random tiny Qwen3 when run on CPU against transformers; with these they agree to ~1e-7.
    dense = transformer_config_kwargs(_dense()[0], ParallelSettings())
    assert dense["activation_func"] is torch.nn.functional.silu
    cfg, _ = _moe()
    for norm_topk, pre_softmax in ((True, False), (False, True)):
        cfg.norm_topk_prob = norm_topk
        kw = transformer_config_kwargs(cfg, ParallelSettings())
        assert kw["moe_router_pre_softmax"] is pre_softmax
    gelu, _ = _dense()
    gelu.hidden_act = "gelu"
    with pytest.raises(BackendError, match="hidden_act='gelu'"):
        transformer_config_kwargs(gelu, ParallelSettings())


def test_rotary_base_is_read_from_either_transformers_layout():
    # transformers 5 keeps it only in rope_parameters (the first GPU run failed on this)
    cfg = Qwen3Config(rope_theta=1_000_000, **SMALL)
    assert rotary_base(cfg) == 1_000_000
    cfg.rope_parameters = None
    with pytest.raises(BackendError, match="rope_theta"):
        rotary_base(cfg)


def test_backend_without_megatron_or_gpu_is_a_clear_error(tmp_path):
    from spade_train.backends.megatron import MegatronBackend

    if importlib.util.find_spec("megatron") is not None and torch.cuda.is_available():
        pytest.skip("megatron-core and a GPU are present: the GPU test covers the backend")
    with pytest.raises(BackendError, match="megatron|GPU"):
        MegatronBackend(model=str(tmp_path))


def _tiny_dir(path) -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    cfg, _ = _dense()
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    vocab = {f"t{i}": i for i in range(96)}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")),
        eos_token="t1",
        pad_token="t0",
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    tok.save_pretrained(path)


def _needs_megatron_on_a_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the Megatron-core step runs on GPUs only")
    if importlib.util.find_spec("megatron") is None:
        pytest.skip("megatron-core is not installed: pip install megatron-core on the GPU machine")


@pytest.mark.gpu
def test_one_training_step_on_a_tiny_qwen3(tmp_path):
    _needs_megatron_on_a_gpu()
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.types import TrainSample

    _tiny_dir(tmp_path)
    backend = MegatronBackend(model=str(tmp_path), lr=1e-2)
    try:
        hf_before = backend.hf_state()
        sample = TrainSample(list(range(2, 20)), [0] * 6 + [1] * 12, [-4.5] * 18, 1.0, "agent")
        first = backend.train_step([sample])
        second = backend.train_step([sample])
        assert first["tokens"] == 12 and first["grad_norm"] > 0
        assert second["loss"] < first["loss"]
        moved = backend.hf_state()
        assert not torch.equal(
            moved["model.embed_tokens.weight"], hf_before["model.embed_tokens.weight"]
        )
    finally:
        backend.close()


@pytest.mark.gpu
def test_megatron_matches_the_local_backend_on_the_same_batch(tmp_path):
    """Same weights, same batch: Megatron's log-probs, loss and grad norm equal the local
    backend's (transformers) in fp32, TF32 off. Tolerances: log-probs 1e-4 absolute, loss and
    grad norm 1e-3 relative, over two AdamW steps."""
    _needs_megatron_on_a_gpu()
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.loss import token_logprobs
    from spade_train.types import TrainSample

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _tiny_dir(tmp_path)
    local = make_backend("local", model=str(tmp_path), device="cuda", dtype="float32", lr=1e-2,
                         micro_batch_size=8, seed=0)  # fmt: skip
    mega = MegatronBackend(model=str(tmp_path), lr=1e-2)
    try:
        g = torch.Generator().manual_seed(1)
        rows = [torch.randint(2, 96, (n,), generator=g).tolist() for n in (24, 17, 31)]
        samples = []
        for row, adv in zip(rows, (1.0, -1.0, 0.5), strict=True):
            ids = torch.tensor([row], device="cuda")
            with torch.no_grad():
                lp, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
                pos = torch.arange(len(row), device="cuda")[None]
                m_logits = mega.model(ids, pos, attention_mask=None).float()
            m_lp = torch.log_softmax(m_logits[0, :-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
            gap = (m_lp - lp[0, 1:]).abs().max().item()
            print(f"megatron vs transformers log-probs, {len(row)} tokens: max |diff| {gap:.2e}")
            assert gap < 1e-4
            cut = len(row) // 3
            mask = [0] * cut + [1] * (len(row) - cut)
            samples.append(TrainSample(row, mask, lp[0].tolist(), adv, "agent"))
        for step in (1, 2):
            a, b = local.train_step(samples), mega.train_step(samples)
            print(f"step {step}: loss {a['loss']:.6g} / {b['loss']:.6g}, "
                  f"grad norm {a['grad_norm']:.6g} / {b['grad_norm']:.6g} (local / megatron)")  # fmt: skip
            assert a["tokens"] == b["tokens"]
            assert b["loss"] == pytest.approx(a["loss"], rel=1e-3, abs=1e-6)
            assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-3)
    finally:
        mega.close()
        local.close()
