"""The local backend on a tiny Qwen3 built from a config: generation, training, checkpoints."""

from dataclasses import replace

import pytest
import torch
from spade_train.backends import BackendError, make_backend
from spade_train.errors import RegistryError
from spade_train.loss import token_logprobs
from spade_train.models import ModelError, resolve_model
from spade_train.types import SamplingParams, TrainSample

CHATS = [[{"role": "user", "content": f"answer {i}"}] for i in range(3)]


@pytest.fixture(scope="module")
def backend():
    return make_backend("local", model="tiny:qwen3", lr=5e-3, micro_batch_size=2, seed=0)


def samples_of(generations, advantage=1.0):
    return [
        TrainSample(
            g.prompt_ids + g.completion_ids,
            [0] * len(g.prompt_ids) + [1] * len(g.completion_ids),
            [0.0] * len(g.prompt_ids) + g.logprobs,
            advantage,
            "agent",
        )
        for g in generations
    ]


def test_seeded_generation_is_reproducible_and_logprobs_match(backend):
    params = SamplingParams(max_new_tokens=6, seed=3)
    first, second = backend.generate(CHATS, params), backend.generate(CHATS, params)
    assert [g.completion_ids for g in first] == [g.completion_ids for g in second]
    other = backend.generate(CHATS, SamplingParams(max_new_tokens=6, seed=4))
    assert [g.completion_ids for g in other] != [g.completion_ids for g in first]
    for g in first:
        assert len(g.logprobs) == len(g.completion_ids) <= 6
        assert g.finish_reason in ("stop", "length")
        ids = torch.tensor([g.prompt_ids + g.completion_ids], device=backend.device)
        with torch.no_grad():
            lp, _ = token_logprobs(backend.model, ids, torch.ones_like(ids))
        assert lp[0, len(g.prompt_ids) :].tolist() == pytest.approx(g.logprobs, abs=1e-4)
    rendered = backend.tokenizer.decode(first[0].prompt_ids)
    assert rendered.endswith("<|im_start|>assistant\n") and "answer 0" in rendered


def test_a_final_assistant_message_is_continued(backend):
    chat = [*CHATS[0], {"role": "assistant", "content": "```python\n"}]
    g = backend.generate([chat], SamplingParams(max_new_tokens=3, seed=0))[0]
    rendered = backend.tokenizer.decode(g.prompt_ids)
    assert rendered.endswith("<|im_start|>assistant\n```python\n") and "answer 0" in rendered
    assert len(g.logprobs) == len(g.completion_ids) <= 3


def test_a_stop_string_ends_the_completion_at_the_token_that_completes_it(backend):
    params = SamplingParams(max_new_tokens=12, seed=5)
    free = backend.generate(CHATS[:2], params)
    text = backend.tokenizer.decode(free[0].completion_ids[:6])
    stop = text[-3:] if len(text) >= 3 else text
    assert stop and stop not in backend.tokenizer.decode(free[0].completion_ids[:3])
    cut = backend.generate(CHATS[:2], replace(params, stop=(stop,)))
    g = cut[0]
    k = len(g.completion_ids)
    assert 3 < k <= 6 and g.completion_ids == free[0].completion_ids[:k]
    assert g.finish_reason == "stop" and g.text.count(stop) >= 1
    assert stop not in backend.tokenizer.decode(g.completion_ids[:-1])
    assert g.logprobs == pytest.approx(free[0].logprobs[:k]) and len(g.logprobs) == k
    # the other row goes on as without the stop string (until it meets the stop itself)
    other = cut[1].completion_ids
    assert other == free[1].completion_ids[: len(other)]


def test_tools_are_rendered_by_the_chat_template(backend):
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    g = backend.generate(CHATS[:1], SamplingParams(max_new_tokens=2, seed=0), tools=[[tool]])[0]
    assert '"lookup"' in backend.tokenizer.decode(g.prompt_ids)
    with pytest.raises(BackendError, match="tools has 2 entries"):
        backend.generate(CHATS, SamplingParams(max_new_tokens=1), tools=[None, None])


def test_train_step_with_positive_advantage_raises_likelihood(backend):
    gens = backend.generate(CHATS, SamplingParams(max_new_tokens=6, seed=5))
    batch = samples_of(gens)
    before = [sum(g.logprobs) for g in gens]
    metrics = [backend.train_step(batch) for _ in range(3)]
    assert metrics[0]["tokens"] == sum(len(g.completion_ids) for g in gens)
    assert metrics[0]["agent/tokens"] == metrics[0]["tokens"] and metrics[0]["grad_norm"] > 0
    after = []
    for g in gens:
        ids = torch.tensor([g.prompt_ids + g.completion_ids], device=backend.device)
        with torch.no_grad():
            lp, _ = token_logprobs(backend.model, ids, torch.ones_like(ids))
        after.append(lp[0, len(g.prompt_ids) :].sum().item())
    assert all(a > b for a, b in zip(after, before, strict=True))
    with pytest.raises(BackendError, match="no samples"):
        backend.train_step([])


def test_zero_advantage_samples_are_skipped_with_the_same_gradient_and_step():
    # b keeps every sample (an entropy term, too small to matter, turns the skipping off)
    a = make_backend("local", model="tiny:qwen3", lr=1e-2, micro_batch_size=1, seed=2)
    b = make_backend("local", model="tiny:qwen3", lr=1e-2, micro_batch_size=1, seed=2,
                     entropy_coef=1e-30)  # fmt: skip
    gens = a.generate(CHATS, SamplingParams(max_new_tokens=6, seed=2))
    batch = [TrainSample(s.input_ids, s.loss_mask, s.old_logprobs, adv, s.role)
             for s, adv in zip(samples_of(gens), (1.0, 0.0, -0.5), strict=True)]  # fmt: skip
    ma, mb = a.train_step(batch), b.train_step(batch)
    assert (ma["trained_samples"], mb["trained_samples"]) == (2.0, 3.0)
    assert ma["tokens"] == mb["tokens"]
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-7) and torch.allclose(p, q, atol=1e-6)
    idle = [TrainSample(s.input_ids, s.loss_mask, s.old_logprobs, 0.0, s.role) for s in batch]
    before = [p.detach().clone() for p in a.model.parameters()]
    ma, mb = a.train_step(idle), b.train_step(idle)
    assert ma["trained_samples"] == 0.0 and ma["grad_norm"] == 0.0
    moved = [not torch.equal(p, q) for p, q in zip(a.model.parameters(), before, strict=True)]
    assert any(moved)  # Adam's momentum still steps, exactly as with zero gradients
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def test_a_token_budget_cuts_micro_batches_without_changing_the_step():
    # float32 on a GPU too (CUDA's default is bfloat16): the gradients are compared at 1e-6
    kw = dict(model="tiny:qwen3", lr=1e-2, micro_batch_size=4, seed=3, dtype="float32")
    a, b = make_backend("local", **kw), make_backend("local", micro_batch_tokens=1, **kw)
    gens = a.generate(CHATS, SamplingParams(max_new_tokens=6, seed=3))
    batch = samples_of(gens, advantage=0.7)
    assert [len(p) for p in a._micro_batches(batch)] == [len(batch)]
    assert [len(p) for p in b._micro_batches(batch)] == [1] * len(batch)  # each row alone
    widths = sorted(len(s.input_ids) for s in batch)
    b.micro_batch_tokens = 2 * widths[-1]
    assert [len(p) for p in b._micro_batches(sorted(batch, key=lambda s: len(s.input_ids)))] == (
        [2, 1] if len(batch) == 3 else [2] * (len(batch) // 2)
    )
    b.micro_batch_tokens = 1
    ma, mb = a.train_step(batch), b.train_step(batch)
    assert abs(ma["loss"] - mb["loss"]) < 1e-6 and ma["tokens"] == mb["tokens"]
    # the same gradient (summation order aside); Adam's step on near-zero gradients can
    # amplify float noise, so the parameters are not compared
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_save_and_load_resume_exactly(tmp_path):
    def run(b, steps, batch):
        return [b.train_step(batch)["loss"] for _ in range(steps)]

    a = make_backend("local", model="tiny:qwen3", lr=1e-2, seed=1)
    batch = samples_of(a.generate(CHATS, SamplingParams(max_new_tokens=5, seed=1)), 0.7)
    run(a, 2, batch)
    a.save(tmp_path / "ckpt")
    straight = run(a, 2, batch) + [a.generate(CHATS, SamplingParams(max_new_tokens=4))[0].text]
    b = make_backend("local", model="tiny:qwen3", lr=1e-2, seed=99)
    b.load(tmp_path / "ckpt")
    resumed = run(b, 2, batch) + [b.generate(CHATS, SamplingParams(max_new_tokens=4))[0].text]
    assert resumed == straight
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)
    with pytest.raises(BackendError, match="not a local-backend checkpoint"):
        b.load(tmp_path)


def test_a_checkpoint_is_a_standard_model_directory_with_the_trainer_state_beside_it(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    a = make_backend("local", model="tiny:qwen3", lr=1e-2, seed=1)
    a.train_step(samples_of(a.generate(CHATS, SamplingParams(max_new_tokens=4, seed=1)), 0.7))
    a.save(tmp_path / "policy")
    files = {p.name for p in (tmp_path / "policy").iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors"} <= files
    assert "tokenizer.json" in files and not any(f.endswith(".pt") for f in files)
    assert (tmp_path / "policy.trainer.pt").is_file()  # optimizer and RNG: beside, not inside
    # transformers loads it as it is: the same weights, the same chat template
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    tok = AutoTokenizer.from_pretrained(tmp_path / "policy")
    assert tok.apply_chat_template(CHATS[0], tokenize=False) == a.tokenizer.apply_chat_template(
        CHATS[0], tokenize=False
    )
    ids = torch.tensor([a.tokenizer("a move \\boxed{3}")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, a.model(ids).logits)


def test_a_lora_checkpoint_holds_merged_weights_and_resumes_its_adapters(tmp_path):
    from transformers import AutoModelForCausalLM

    lora = {"r": 4, "alpha": 8}
    a = make_backend("local", model="tiny:qwen3", lr=1e-2, seed=1, lora=lora)
    batch = samples_of(a.generate(CHATS, SamplingParams(max_new_tokens=4, seed=1)), 0.7)
    a.train_step(batch)
    a.save(tmp_path / "policy")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "policy")
    ids = torch.tensor([a.tokenizer("a move")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, a.model(ids).logits, atol=1e-5)
    straight = a.train_step(batch)["loss"]
    b = make_backend("local", model="tiny:qwen3", lr=1e-2, seed=5, lora=lora)
    b.load(tmp_path / "policy")
    assert b.train_step(batch)["loss"] == straight


def test_lora_trains_only_adapters():
    b = make_backend("local", model="tiny:qwen3", lr=1e-2, lora={"r": 4, "alpha": 8})
    frozen = {n: p.detach().clone() for n, p in b.model.named_parameters() if not p.requires_grad}
    assert frozen and all("lora" not in n for n in frozen)
    b.train_step(samples_of(b.generate(CHATS, SamplingParams(max_new_tokens=4, seed=0))))
    for n, p in b.model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n])


def test_bad_options_and_models_are_clear_errors(tmp_path):
    with pytest.raises(BackendError, match="unknown option"):
        make_backend("local", model="tiny:qwen3", learning_rate=1)
    with pytest.raises(RegistryError, match="unknown backend 'nope'; choose from local, ray"):
        make_backend("nope")
    with pytest.raises(ModelError, match="config.json missing"):
        resolve_model(str(tmp_path / "absent"))
    with pytest.raises(ModelError, match="unknown tiny model"):
        resolve_model("tiny:llama")


def test_tiny_models_are_deterministic(tmp_path):
    from safetensors.torch import load_file

    one = resolve_model("tiny:qwen3?layers=1&hidden=32", cache_dir=tmp_path / "a")
    two = resolve_model("tiny:qwen3?layers=1&hidden=32", cache_dir=tmp_path / "b")
    w1, w2 = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
    assert (one / "tokenizer.json").read_text() == (two / "tokenizer.json").read_text()
    assert not list((tmp_path / "a").glob(".*"))  # no temp dirs left behind
