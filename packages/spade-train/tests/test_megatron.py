"""The Megatron backend on CPU in a world of one rank (gloo): HF ⇄ Megatron mapping, weights
in and out, the update against the local backend's (KL and TIS on and off), micro-batches,
activation recomputation, bfloat16, checkpoints, generation. Worlds of several ranks:
test_megatron_world.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from spade_train.backends import BackendError, make_backend
from spade_train.backends.megatron import (
    MegatronBackend,
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
from spade_train.backends.megatron_map import HFCheckpoint
from spade_train.loss import token_logprobs
from spade_train.types import SamplingParams, TrainSample
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

pytest.importorskip("megatron.core", reason="megatron-core: pip install 'spade-train[megatron]'")

SMALL = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=128)  # fmt: skip


def _dense(tied: bool = False) -> tuple[Qwen3Config, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    cfg = Qwen3Config(intermediate_size=48, tie_word_embeddings=tied, **SMALL)
    return cfg, Qwen3ForCausalLM(cfg).state_dict()


def _moe_config() -> Qwen3MoeConfig:
    return Qwen3MoeConfig(intermediate_size=48, moe_intermediate_size=16, num_experts=4,
                          num_experts_per_tok=2, norm_topk_prob=True, **SMALL)  # fmt: skip


def _moe() -> tuple[Qwen3MoeConfig, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    cfg = _moe_config()
    return cfg, Qwen3MoeForCausalLM(cfg).state_dict()


def tiny_qwen3(path: Path, moe: bool = False, tied: bool = False) -> Path:
    """A config-built Qwen3 (or Qwen3-MoE) directory with a word-level ChatML tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<|im_start|>", "<|im_end|>", "<pad>"]
    words = special + [f"t{i}" for i in range(SMALL["vocab_size"] - 3)]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, "t0"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens(special)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>")
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
    )
    torch.manual_seed(0)
    ids = dict(eos_token_id=1, pad_token_id=2)
    if moe:
        model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**{**_moe_config().to_dict(), **ids}))
    else:
        model = Qwen3ForCausalLM(
            Qwen3Config(intermediate_size=48, tie_word_embeddings=tied, **SMALL, **ids)
        )
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def batch(lengths=(24, 17, 31, 12), advantages=(1.0, -1.0, 0.5, 0.0), seed=1) -> list[TrainSample]:
    """Samples whose rollout log-probs differ from any policy's (so TIS weights are not 1)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n, adv in zip(lengths, advantages, strict=True):
        row = torch.randint(3, 96, (n,), generator=g).tolist()
        cut = n // 3
        old = (-4.6 + 0.8 * torch.randn(n, generator=g)).tolist()
        out.append(TrainSample(row, [0] * cut + [1] * (n - cut), old, adv, "agent"))
    return out


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k


def _exported(backend: MegatronBackend, bucket_bytes: int = 1 << 20) -> dict[str, torch.Tensor]:
    return {k: v for bucket in backend.export_hf_buckets(bucket_bytes) for k, v in bucket}


# -- the name mapping (no megatron-core needed) ------------------------------------------------
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
    per_expert = megatron_to_hf(mega, shape, fused_experts=False)
    assert per_expert["model.layers.1.mlp.experts.2.gate_proj.weight"].shape == (16, 32)
    _same(megatron_to_hf(hf_to_megatron(per_expert, shape), shape, fused_experts=False), per_expert)
    _same(hf_to_megatron(per_expert, shape), mega)


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_per_parameter_mapping_agrees_with_the_whole_state_mapping(kind):
    # the bucketed export and the sharded import convert one parameter at a time
    cfg, hf = _dense() if kind == "dense" else _moe()
    shape = QwenShape.from_hf(cfg)
    local = te_to_local(hf_to_megatron(hf, shape))
    _same(local_to_te(local), hf_to_megatron(hf, shape))
    for name, tensor in local.items():
        assert torch.equal(param_from_hf(name, hf, shape), tensor), name
    pieces = dict(p for name, t in local.items() for p in param_to_hf(name, t, shape))
    _same(pieces, megatron_to_hf(hf_to_megatron(hf, shape), shape, fused_experts=False))
    shifted = param_to_hf("decoder.layers.0.mlp.experts.local_experts.1.linear_fc2.weight",
                          torch.zeros(32, 16), shape, expert_offset=2)  # fmt: skip
    assert [n for n, _ in shifted] == ["model.layers.0.mlp.experts.3.down_proj.weight"]
    with pytest.raises(BackendError, match="no HF name"):
        param_to_hf("decoder.layers.0.bogus.weight", torch.zeros(1), shape)


def test_extra_layers_are_an_error():
    cfg, hf = _dense()
    hf["model.layers.7.input_layernorm.weight"] = torch.ones(32)
    with pytest.raises(BackendError, match="beyond num_layers"):
        hf_to_megatron(hf, QwenShape.from_hf(cfg))


def test_parallel_settings_from_options():
    s = ParallelSettings.from_options({"tensor_parallel": 2, "expert_parallel": 2}, world_size=8)
    assert (s.tp, s.pp, s.ep) == (2, 1, 2)
    with pytest.raises(BackendError, match="not a multiple"):
        ParallelSettings.from_options({"tensor_parallel": 3}, world_size=8)
    with pytest.raises(BackendError, match="expert_parallel"):
        ParallelSettings.from_options({"expert_parallel": 3}, world_size=4)
    with pytest.raises(BackendError, match=">= 1"):
        ParallelSettings.from_options({"pipeline_parallel": 0})


def test_transformer_config_follows_the_hf_config_not_megatron_defaults():
    cfg, _ = _moe()
    kw = transformer_config_kwargs(cfg, ParallelSettings(tp=2, ep=2))
    assert kw["num_query_groups"] == 2 and kw["kv_channels"] == 8 and kw["qk_layernorm"]
    assert kw["num_moe_experts"] == 4 and kw["moe_router_topk"] == 2
    assert kw["moe_ffn_hidden_size"] == 16 and kw["expert_model_parallel_size"] == 2
    dense = transformer_config_kwargs(_dense()[0], ParallelSettings())
    assert "num_moe_experts" not in dense and dense["ffn_hidden_size"] == 48
    # Megatron's defaults (GELU; top-k before the softmax) put logits ~1e-2 off transformers'
    assert dense["activation_func"] is torch.nn.functional.silu
    for norm_topk, pre_softmax in ((True, False), (False, True)):
        cfg.norm_topk_prob = norm_topk
        assert transformer_config_kwargs(cfg, ParallelSettings())["moe_router_pre_softmax"] is (
            pre_softmax
        )
    gelu, _ = _dense()
    gelu.hidden_act = "gelu"
    with pytest.raises(BackendError, match="hidden_act='gelu'"):
        transformer_config_kwargs(gelu, ParallelSettings())


def test_rotary_base_is_read_from_either_transformers_layout():
    cfg = Qwen3Config(rope_theta=1_000_000, **SMALL)
    assert rotary_base(cfg) == 1_000_000
    cfg.rope_parameters = None
    with pytest.raises(BackendError, match="rope_theta"):
        rotary_base(cfg)


def test_hf_checkpoint_reads_single_and_sharded_safetensors(tmp_path):
    model = tiny_qwen3(tmp_path / "m")
    hf = HFCheckpoint(model)
    full = Qwen3ForCausalLM.from_pretrained(model).state_dict()
    assert set(hf) == set(full) and torch.equal(hf["model.norm.weight"], full["model.norm.weight"])
    Qwen3ForCausalLM.from_pretrained(model).save_pretrained(tmp_path / "s", max_shard_size="20KB")
    sharded = HFCheckpoint(tmp_path / "s")
    assert (tmp_path / "s/model.safetensors.index.json").exists() and set(sharded) == set(full)
    assert torch.equal(sharded["lm_head.weight"], full["lm_head.weight"])
    with pytest.raises(BackendError, match="no model.safetensors"):
        HFCheckpoint(tmp_path)


# -- a world of one rank in this process -------------------------------------------------------
@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory) -> Path:
    return tiny_qwen3(tmp_path_factory.mktemp("dense") / "m")


@pytest.fixture
def mega(dense_dir):
    backend = MegatronBackend(model=str(dense_dir), device="cpu", lr=1e-2, seed=0)
    yield backend
    backend.close()


def test_logprobs_equal_transformers_for_the_same_weights(mega, dense_dir):
    hf = Qwen3ForCausalLM.from_pretrained(dense_dir, dtype=torch.float32)
    rows = [s.input_ids for s in batch()]
    worst = 0.0
    for row, got in zip(rows, mega.logprobs(rows), strict=True):
        ids = torch.tensor([row])
        with torch.no_grad():
            want, _ = token_logprobs(hf, ids, torch.ones_like(ids))
        worst = max(worst, (torch.tensor(got) - want[0]).abs().max().item())
    print(f"megatron (CPU, fp32) vs transformers log-probs: max |diff| {worst:.2e}")
    assert worst < 1e-5


def test_hf_to_megatron_to_hf_is_exact_in_buckets(mega, dense_dir):
    want = dict(HFCheckpoint(dense_dir))
    buckets = list(mega.export_hf_buckets(bucket_bytes=8192))
    sizes = [sum(t.numel() * t.element_size() for _, t in b) for b in buckets]
    assert len(buckets) > 3 and all(
        s <= 8192 or len(b) <= 3 for s, b in zip(sizes, buckets, strict=True)
    )
    got = {k: v for b in buckets for k, v in b}
    assert sum(len(b) for b in buckets) == len(got)  # every name once
    _same(got, want)
    # and back in: a changed checkpoint loads, and exports as itself
    changed = {k: v + 0.5 for k, v in want.items()}
    mega.rank0.load_hf_state(changed)
    _same(_exported(mega), changed)
    mega.load_hf(dense_dir)
    _same(_exported(mega), want)


def test_push_hands_the_same_buckets_to_a_sink_in_the_rank(mega, dense_dir):
    got: list[list[str]] = []
    n = mega.push_hf_buckets(lambda bucket: got.append([k for k, _ in bucket]), 8192)
    assert got == [[k for k, _ in b] for b in mega.export_hf_buckets(8192)]
    assert n == sum(map(len, got)) == len(HFCheckpoint(dense_dir))


def test_save_hf_writes_a_checkpoint_transformers_loads(mega, dense_dir, tmp_path):
    mega.save_hf(tmp_path / "hf", bucket_bytes=8192)
    index = json.loads((tmp_path / "hf/model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 3
    back = Qwen3ForCausalLM.from_pretrained(tmp_path / "hf").state_dict()
    _same(back, Qwen3ForCausalLM.from_pretrained(dense_dir).state_dict())
    assert not (tmp_path / ".hf.tmp").exists()


@pytest.mark.parametrize(
    ("kl_coef", "tis_clip"), [(0.0, None), (0.1, None), (0.0, 2.0), (0.1, 2.0)]
)
def test_the_update_equals_the_local_backends(dense_dir, kl_coef, tis_clip):
    """Same weights, same batch, same options: loss, grad norm, KL/TIS metrics and the weights
    after two AdamW steps equal the local backend's (float32 on CPU)."""
    opts = dict(lr=1e-2, kl_coef=kl_coef, tis_clip=tis_clip, micro_batch_size=2, seed=0,
                entropy_coef=0.01 if kl_coef else 0.0, clip_eps_high=0.28)  # fmt: skip
    local = make_backend("local", model=str(dense_dir), device="cpu", dtype="float32", **opts)
    mega = MegatronBackend(model=str(dense_dir), device="cpu", **opts)
    try:
        samples = batch()
        for step in (1, 2):
            a, b = local.train_step(samples), mega.train_step(samples)
            print(f"kl {kl_coef} tis {tis_clip} step {step}: loss {a['loss']:.8f} / "
                  f"{b['loss']:.8f}, grad norm {a['grad_norm']:.8f} / {b['grad_norm']:.8f}")  # fmt: skip
            assert a["tokens"] == b["tokens"] and a["trained_samples"] == b["trained_samples"]
            assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-7)
            assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)
            for key in ("clip_frac", "approx_kl", "entropy"):
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
            assert ("tis_mean" in b) is (tis_clip is not None)
        # Adam divides by the root of the squared gradient: an element whose gradient is ~0
        # moves by up to lr on float rounding, so single elements may differ by ~1e-5
        weights = _exported(mega)
        for k, v in local.model.state_dict().items():
            gap = (weights[k] - v).abs()
            assert float(gap.mean()) < 1e-6 and float(gap.max()) < 1e-4, k
    finally:
        mega.close()
        local.close()


def test_kl_and_tis_change_the_update(dense_dir):
    # the terms are live: each changes the loss of the same batch on the same weights
    losses = {}
    for kl, tis in ((0.0, None), (0.5, None), (0.0, 1.05)):
        mega = MegatronBackend(
            model=str(dense_dir), device="cpu", kl_coef=kl, tis_clip=tis, lr=0.01
        )
        try:
            mega.train_step(batch())  # the second step sees weights away from the reference
            losses[(kl, tis)] = mega.train_step(batch())["loss"]
        finally:
            mega.close()
    base = losses[(0.0, None)]
    assert losses[(0.5, None)] != pytest.approx(base, rel=1e-4)
    assert losses[(0.0, 1.05)] != pytest.approx(base, rel=1e-4)


def test_micro_batches_and_recomputation_do_not_change_the_step(dense_dir):
    results = []
    for opts in ({"micro_batch_size": 8}, {"micro_batch_size": 1},
                 {"micro_batch_size": 3, "micro_batch_tokens": 40},
                 {"micro_batch_size": 2, "gradient_checkpointing": True}):  # fmt: skip
        mega = MegatronBackend(model=str(dense_dir), device="cpu", kl_coef=0.1, **opts)
        try:
            results.append(mega.train_step(batch()))
        finally:
            mega.close()
    for r in results[1:]:
        assert r["loss"] == pytest.approx(results[0]["loss"], rel=1e-5)
        assert r["grad_norm"] == pytest.approx(results[0]["grad_norm"], rel=1e-5)


def test_max_seq_len_keeps_each_rows_last_tokens_as_the_local_backend(dense_dir):
    opts = dict(lr=1e-2, max_seq_len=16, seed=0)
    local = make_backend("local", model=str(dense_dir), device="cpu", dtype="float32", **opts)
    mega = MegatronBackend(model=str(dense_dir), device="cpu", **opts)
    try:
        a, b = local.train_step(batch()), mega.train_step(batch())
        assert a["tokens"] == b["tokens"] < sum(sum(s.loss_mask) for s in batch())
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)
    finally:
        mega.close()
        local.close()


def test_bfloat16_trains_with_float32_master_weights(dense_dir):
    mega = MegatronBackend(model=str(dense_dir), device="cpu", dtype="bfloat16", lr=1e-3)
    try:
        rank = mega.rank0
        assert rank is not None and rank.describe()["dtype"] == "torch.bfloat16"
        assert all(p.dtype == torch.bfloat16 for p in rank.model.parameters())
        assert all(m.dtype == torch.float32 for m in rank.main)
        before = [m.detach().clone() for m in rank.main]
        out = mega.train_step(batch())
        assert out["grad_norm"] > 0 and all(b.dtype == torch.bfloat16 for _, b in
                                            next(mega.export_hf_buckets(1 << 30)))  # fmt: skip
        # an update below bfloat16's resolution still moves the float32 copies
        assert any(not torch.equal(a, m) for a, m in zip(before, rank.main, strict=True))
    finally:
        mega.close()


def test_weight_decay_spares_norms_and_betas_are_honoured(dense_dir):
    mega = MegatronBackend(model=str(dense_dir), device="cpu", weight_decay=0.1, betas=(0.9, 0.98))
    try:
        groups = mega.rank0.opt.param_groups
        assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
        assert {g["betas"] for g in groups} == {(0.9, 0.98)}
        assert all(p.dim() == 1 for p in groups[1]["params"]) and groups[1]["params"]
    finally:
        mega.close()


def test_checkpoint_round_trip_continues_identically(dense_dir, tmp_path):
    mega = MegatronBackend(model=str(dense_dir), device="cpu", lr=1e-2, dtype="bfloat16")
    try:
        mega.train_step(batch())
        mega.save(tmp_path / "ck")
        after = mega.train_step(batch(seed=2))
        mega.load(tmp_path / "ck")
        again = mega.train_step(batch(seed=2))
        assert again["loss"] == after["loss"] and again["grad_norm"] == after["grad_norm"]
        assert again["step"] == after["step"] == 2.0
    finally:
        mega.close()
    meta = json.loads((tmp_path / "ck/megatron.json").read_text())
    meta["layout"]["world_size"] = 4
    (tmp_path / "ck/megatron.json").write_text(json.dumps(meta))
    other = MegatronBackend(model=str(dense_dir), device="cpu")
    try:
        with pytest.raises(BackendError, match="same parallel options"):
            other.load(tmp_path / "ck")
        with pytest.raises(BackendError, match="not a megatron-backend checkpoint"):
            other.load(tmp_path)
    finally:
        other.close()


def test_generation_batches_stops_and_records_the_policys_logprobs(mega):
    chats = [[{"role": "user", "content": f"t{5 + i} t{9 + i}"}] for i in range(3)]
    greedy = SamplingParams(max_new_tokens=6, temperature=0.0, seed=0)
    rank = mega.rank0
    rank.gen_batch_size = 1
    one = mega.generate(chats, greedy)
    rank.gen_batch_size = 16
    many = mega.generate(chats, greedy)
    assert [g.completion_ids for g in one] == [g.completion_ids for g in many]
    sampled = mega.generate(chats, SamplingParams(max_new_tokens=6, top_k=5, top_p=0.9, seed=3))
    for g in sampled:
        assert 0 < len(g.completion_ids) <= 6 and len(g.logprobs) == len(g.completion_ids)
        full = mega.logprobs([g.prompt_ids + g.completion_ids])[0][len(g.prompt_ids) :]
        assert max(abs(a - b) for a, b in zip(full, g.logprobs, strict=True)) < 1e-5
    word = rank.tokenizer.decode(many[0].completion_ids[1:2])
    stopped = mega.generate(chats[:1], SamplingParams(max_new_tokens=6, temperature=0.0,
                                                      stop=(word,)))[0]  # fmt: skip
    assert stopped.finish_reason == "stop" and len(stopped.completion_ids) == 2
    rank.max_seq_len = 20  # prompts are cut to max(16, max_seq_len - max_new_tokens) tokens
    long = [[{"role": "user", "content": " ".join(f"t{i}" for i in range(40))}]]
    cut = mega.generate(long, greedy)[0]
    assert len(cut.prompt_ids) == 16 and rank.truncated_prompts == 1
    rank.max_seq_len = 2048
    with pytest.raises(BackendError, match="balanced_stop"):
        mega.generate(chats, SamplingParams(stop=("}",), balanced_stop=True))


def test_one_world_per_process(mega, dense_dir):
    with pytest.raises(BackendError, match="already runs in this process"):
        MegatronBackend(model=str(dense_dir), device="cpu")
    assert len(mega.logprobs([[3, 4, 5]])[0]) == 3  # the first one is untouched


def test_bad_options_are_one_line_errors(dense_dir, tmp_path):
    with pytest.raises(BackendError, match="unknown option.*bogus"):
        MegatronBackend(model=str(dense_dir), bogus=1)
    with pytest.raises(BackendError, match="no LoRA"):
        MegatronBackend(model=str(dense_dir), lora={"r": 8})
    with pytest.raises(BackendError, match="pipeline_parallel=2"):
        MegatronBackend(model=str(dense_dir), pipeline_parallel=2, world_size=2)
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="no CUDA GPU"):
            MegatronBackend(model=str(dense_dir), device="cuda")
    empty = tmp_path / "empty"
    shutil.copytree(dense_dir, empty)
    (empty / "model.safetensors").unlink()
    with pytest.raises(BackendError, match="no model.safetensors"):
        MegatronBackend(model=str(empty), device="cpu")


def test_vocab_parallel_logprobs_and_their_gradients_equal_log_softmax(mega):
    from spade_train.backends.megatron_model import vocab_parallel_logprobs

    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(2, 5, 96, generator=g)).requires_grad_(True)
    targets = torch.randint(0, 96, (2, 5), generator=g)
    w1, w2 = torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
    logp, ent = vocab_parallel_logprobs(logits, targets)
    (w1 * logp + w2 * ent).sum().backward()
    ref = logits.detach().clone().requires_grad_(True)
    lp_all = torch.log_softmax(ref, -1)
    want_logp = lp_all.gather(-1, targets[..., None])[..., 0]
    want_ent = -(lp_all.exp() * lp_all).sum(-1)
    (w1 * want_logp + w2 * want_ent).sum().backward()
    assert torch.allclose(logp, want_logp, atol=1e-5) and torch.allclose(ent, want_ent, atol=1e-5)
    assert torch.allclose(logits.grad, ref.grad, atol=1e-5)


@pytest.mark.gpu
def test_the_update_equals_the_local_backends_on_cuda(dense_dir):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the CPU tests above cover the same update")
    torch.backends.cuda.matmul.allow_tf32 = False
    opts = dict(lr=1e-2, kl_coef=0.05, tis_clip=2.0, micro_batch_size=2, seed=0)
    local = make_backend("local", model=str(dense_dir), device="cuda", dtype="float32", **opts)
    mega = MegatronBackend(model=str(dense_dir), device="cuda", dtype="float32", **opts)
    try:
        for _ in range(2):
            a, b = local.train_step(batch()), mega.train_step(batch())
            print(f"cuda: loss {a['loss']:.8f} / {b['loss']:.8f}, "
                  f"grad norm {a['grad_norm']:.8f} / {b['grad_norm']:.8f}")  # fmt: skip
            assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6)
            assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    finally:
        mega.close()
        local.close()
