"""The SGLang client, rollout client and weight sync against a real localhost server process
that speaks SGLang's native endpoints over a tiny real model (``sglang_env/``'s stand-in engine;
``test_sglang_contract.py`` checks the same payloads against SGLang's own app)."""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest
import torch
from spade_train.backends.rollout_client import RequestTiming, RolloutClient, fit_prompt
from spade_train.backends.sglang import SGLangClient, launch_engine, request_seed, sampling_payload
from spade_train.backends.weight_sync import (
    ServerTarget,
    WeightPush,
    dtype_name,
    iter_buckets,
    reads_marker,
    send_weights,
    shared_marker,
)
from spade_train.errors import (
    BackendError,
    GenerationAborted,
    PromptTooLong,
    RolloutTimeout,
    StaleWeights,
)
from spade_train.models import resolve_model
from spade_train.types import SamplingParams
from standin_servers import plain_server

CONTEXT = 96
CHAT = [{"role": "user", "content": "Say a number."}]


@pytest.fixture(scope="module")
def model_dir():
    return str(resolve_model("tiny:qwen3"))


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def server(model_dir):
    srv = plain_server(model_dir, CONTEXT)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def slow_server(model_dir):
    srv = plain_server(model_dir, CONTEXT, delay_s=0.05)
    yield srv
    srv.stop()


def test_sampling_payload_and_per_request_seeds():
    p = sampling_payload(SamplingParams(max_new_tokens=5, temperature=0.5, top_k=0, seed=3))
    assert p == {
        "max_new_tokens": 5,
        "temperature": 0.5,
        "top_p": 1.0,
        "top_k": -1,
        "sampling_seed": 3,
    }
    assert sampling_payload(SamplingParams(top_k=4, stop=("\n",)))["stop"] == ["\n"]
    seeds = [request_seed(7, i) for i in range(64)]
    assert len(set(seeds)) == 64 and seeds == [request_seed(7, i) for i in range(64)]
    assert all(0 <= s < 2**63 for s in seeds) and request_seed(8, 0) != seeds[0]


def test_a_group_of_copies_differs_and_a_rerun_reproduces(server, tokenizer):
    client = RolloutClient([server.url], tokenizer, CONTEXT, concurrency=4)
    try:
        params = SamplingParams(max_new_tokens=12, temperature=1.0, seed=5)
        group = client.generate_each([CHAT] * 6, params)
        again = client.generate_each([CHAT] * 6, params)
    finally:
        client.close()
    texts = [g.completion_ids for g in group]
    assert len({tuple(t) for t in texts}) > 1, "copies of one prompt collapsed to one sample"
    assert [g.completion_ids for g in again] == texts
    for g in group:
        assert len(g.logprobs) == len(g.completion_ids) > 0 and g.finish_reason in (
            "stop",
            "length",
        )
        assert all(lp <= 0 for lp in g.logprobs)


def test_over_long_prompts_are_truncated_or_a_typed_error(server, tokenizer):
    ids = list(range(200))
    kept, max_new, cut = fit_prompt(ids, 32, CONTEXT)
    assert cut and kept == ids[-(CONTEXT - 32) :] and max_new == 32
    kept, max_new, cut = fit_prompt(ids[:90], 32, CONTEXT)
    assert cut and len(kept) == 64 and max_new == 32
    # asking for more than the context: the prompt keeps its last 16 tokens (as the local
    # backend does), the answer gets what is left
    kept, max_new, _ = fit_prompt(ids[:20], 200, CONTEXT)
    assert kept == ids[4:20] and max_new == CONTEXT - 16
    with pytest.raises(PromptTooLong):
        fit_prompt(ids, 32, 12)  # not even 16 prompt tokens fit
    # the server's own refusal, when a client sends an unfitted prompt, is the same type
    client = SGLangClient(server.url)
    with pytest.raises(PromptTooLong, match="context length"):
        client.generate_one(ids, SamplingParams(max_new_tokens=4), seed=1, rid="long", timeout_s=30)
    # in a batch: the one long conversation is truncated and counted, the batch goes through
    rc = RolloutClient([server.url], tokenizer, CONTEXT)
    long_chat = [{"role": "user", "content": "number " * 400}]
    out = rc.generate_each([CHAT, long_chat, CHAT], SamplingParams(max_new_tokens=4, seed=1))
    assert rc.truncated_prompts == 1 and all(not isinstance(r, Exception) for r in out)
    assert len(out[1].prompt_ids) <= CONTEXT - 4
    rc.context_length = None  # a client that does not fit prompts: the server's refusal, typed
    refused = rc.generate_each([CHAT, long_chat], SamplingParams(max_new_tokens=4, seed=1))
    rc.close()
    assert not isinstance(refused[0], Exception) and isinstance(refused[1], PromptTooLong)


def test_stale_weight_version_is_a_typed_error(server):
    client = SGLangClient(server.url)
    assert client.weight_version() == "0"
    with pytest.raises(StaleWeights, match="expected 7"):
        client.generate_one([1, 2, 3], SamplingParams(max_new_tokens=2), seed=1, rid="s",
                            timeout_s=30, expected_version="7")  # fmt: skip
    done = client.generate_one([1, 2, 3], SamplingParams(max_new_tokens=2), seed=1, rid="s",
                               timeout_s=30, expected_version="0")  # fmt: skip
    assert done.weight_version == "0"


def test_abort_is_typed_and_the_rollout_client_retries_it(slow_server, tokenizer):
    client = SGLangClient(slow_server.url)
    errors: list[Exception] = []

    def run():
        try:
            client.generate_one(
                [1, 2, 3], SamplingParams(max_new_tokens=40), seed=1, rid="a", timeout_s=30
            )
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    client.pause("abort")
    t.join(10)
    client.resume()
    assert len(errors) == 1 and isinstance(errors[0], GenerationAborted)
    # a paused server, then resumed: the client's retry finishes the request
    rc = RolloutClient([slow_server.url], tokenizer, CONTEXT)
    threading.Timer(0.4, lambda: (client.pause("abort"), time.sleep(0.3), client.resume())).start()
    out = rc.generate_each([CHAT], SamplingParams(max_new_tokens=30, seed=2))
    rc.close()
    assert not isinstance(out[0], Exception) and rc.retried >= 1


def test_timeouts_are_sized_to_the_request_and_typed(slow_server, tokenizer):
    timing = RequestTiming(base_s=1, per_token_s=0.5, max_s=3)
    assert timing.limit(2) == 2 and timing.limit(100) == 3
    quick = RequestTiming(base_s=0.2, per_token_s=0.0)
    rc = RolloutClient([slow_server.url], tokenizer, CONTEXT, timing=quick, retries=0)
    start = time.monotonic()
    out = rc.generate_each([CHAT], SamplingParams(max_new_tokens=40, seed=1))
    rc.close()
    assert isinstance(out[0], RolloutTimeout) and time.monotonic() - start < 5


def _perturbed_state(model_dir: str, scale: float):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return model


def test_distributed_push_over_gloo_changes_the_served_weights(model_dir):
    srv = plain_server(model_dir, CONTEXT)
    try:
        client = SGLangClient(srv.url)
        probe = dict(seed=3, rid="p", timeout_s=30)
        params = SamplingParams(max_new_tokens=6, temperature=0.0)
        before = client.generate_one([5, 6, 7], params, **probe)
        model = _perturbed_state(model_dir, 0.5)
        state = model.state_dict()
        push = WeightPush("distributed", (ServerTarget(srv.url),), "3", bucket_bytes=64 << 10,
                          group_backend="gloo", master_address="127.0.0.1", timeout_s=60)  # fmt: skip
        client.pause("abort")
        report = send_weights(iter_buckets(state.items(), push.bucket_bytes), push)
        client.resume()
        assert report.buckets > 1 and report.tensors == len(state)
        assert client.weight_version() == "3"
        after = client.generate_one([5, 6, 7], params, expected_version="3", **probe)
        with torch.no_grad():  # the served model is now the pushed one: same greedy tokens
            ids = torch.tensor([[5, 6, 7]])
            want = []
            for _ in range(len(after.ids)):
                nxt = int(model(ids).logits[0, -1].argmax())
                want.append(nxt)
                ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
        assert after.ids == want[: len(after.ids)]
        assert after.logprobs != before.logprobs
    finally:
        srv.stop()


def test_disk_publish_checks_the_directory_is_shared(tmp_path, model_dir):
    shared_marker(str(tmp_path / "pub"), "tok")
    assert reads_marker(str(tmp_path / "pub"), "tok")
    assert not reads_marker(str(tmp_path / "pub"), "other")
    assert not reads_marker(str(tmp_path / "elsewhere"), "tok")
    assert dtype_name(torch.bfloat16) == "bfloat16"


def test_health_retries_then_fails_clearly():
    with pytest.raises(BackendError, match="is the server up"):
        SGLangClient("http://127.0.0.1:9", retries=0, timeout_s=1).health()
    with pytest.raises(BackendError, match="http://"):
        SGLangClient("localhost:30000")


def test_launch_engine_without_sglang_or_gpu_is_a_clear_error():
    if importlib.util.find_spec("sglang") is not None and torch.cuda.is_available():
        pytest.skip("sglang and a GPU are present: the GPU test covers launch_engine")
    with pytest.raises(BackendError, match="sglang"):
        launch_engine("/nonexistent")
