"""The project's SGLang client against SGLang 0.5.23's own HTTP app (its routes, request types,
validation and error handling), with only the engine behind the app replaced by a stand-in
(``sglang_env/spade_sglang_app.py``). The server is started with the very command line the ray
backend builds (``server_command``), parsed by SGLang's own argument parser.

Needs the SGLang test environment (``scripts/sglang-test-env.sh``); skips, saying so, without it.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from spade_train.backends.rollout_client import RolloutClient
from spade_train.backends.sglang import SGLangClient
from spade_train.backends.sglang_server import ServerSpec, server_command
from spade_train.backends.weight_sync import ServerTarget, WeightPush, iter_buckets, send_weights
from spade_train.errors import GenerationAborted, PromptTooLong, StaleWeights
from spade_train.models import resolve_model
from spade_train.types import SamplingParams
from standin_servers import (
    SGLANG_ENV_MISSING,
    SGLANG_PYTHON,
    Server,
    free_port,
    sglang_env_ready,
    standin_env,
)

pytestmark = pytest.mark.skipif(not sglang_env_ready(), reason=SGLANG_ENV_MISSING)
CONTEXT = 96
CHAT = [{"role": "user", "content": "Say a number."}]


@pytest.fixture(scope="module")
def model_dir():
    return str(resolve_model("tiny:qwen3"))


@pytest.fixture(scope="module")
def app(model_dir):
    port = free_port()
    spec = ServerSpec(model_dir, context_length=CONTEXT, dtype="float32", seed=0, memory_saver=True,
                      python=str(SGLANG_PYTHON), module="spade_sglang_app")  # fmt: skip
    cmd = server_command(spec, "127.0.0.1", port, base_gpu_id=0)
    assert "--enable-deterministic-inference" in cmd and "--weight-version" in cmd
    srv = Server(cmd[:1] + ["-W", "ignore"] + cmd[1:], port, standin_env(delay_s=0.02))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def test_generation_fields_are_accepted_and_seeds_are_per_request(app, tokenizer):
    rc = RolloutClient([app.url], tokenizer, CONTEXT, concurrency=4)
    params = SamplingParams(
        max_new_tokens=6, temperature=0.9, top_p=0.95, top_k=50, stop=("\n",), seed=11
    )
    out = rc.generate_each([CHAT] * 4, params)
    again = rc.generate_each([CHAT] * 4, params)
    rc.close()
    assert all(not isinstance(g, Exception) for g in out), out
    assert len({tuple(g.completion_ids) for g in out}) > 1  # copies of one prompt differ
    assert [g.completion_ids for g in again] == [g.completion_ids for g in out]
    for g in out:
        assert len(g.logprobs) == len(g.completion_ids) and g.finish_reason in ("stop", "length")


def test_over_long_prompt_is_prompt_too_long(app):
    client = SGLangClient(app.url)
    with pytest.raises(PromptTooLong, match="context length"):
        client.generate_one(list(range(3, 203)), SamplingParams(max_new_tokens=4), seed=1,
                            rid="too-long", timeout_s=60)  # fmt: skip


def test_abort_by_pause_is_generation_aborted(app):
    client = SGLangClient(app.url)
    caught: list[Exception] = []

    def run() -> None:
        try:
            client.generate_one(
                [1, 2, 3], SamplingParams(max_new_tokens=60), seed=2, rid="ab", timeout_s=60
            )
        except Exception as exc:  # noqa: BLE001
            caught.append(exc)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.6)
    client.pause("abort")
    t.join(30)
    client.resume()
    assert len(caught) == 1 and isinstance(caught[0], GenerationAborted), caught


def test_stale_weight_version_is_stale_weights(app):
    client = SGLangClient(app.url)
    client.set_weight_version("5")
    assert client.weight_version() == "5"
    with pytest.raises(StaleWeights, match="expected 6"):
        client.generate_one([1, 2], SamplingParams(max_new_tokens=2), seed=1, rid="v",
                            timeout_s=60, expected_version="6")  # fmt: skip


def test_control_endpoints_are_accepted(app, tmp_path, model_dir):
    client = SGLangClient(app.url)
    client.health()
    client.flush_cache()
    client.pause("retract")
    client.resume()
    client.release_memory(["kv_cache", "weights"])
    client.resume_memory(["weights", "kv_cache"])
    client.abort(rid="nothing-in-flight")
    client.update_weights_from_disk(model_dir, version="disk-1")
    assert client.weight_version() == "disk-1"


def test_distributed_push_meets_sglangs_own_process_group(app, model_dir):
    from transformers import AutoModelForCausalLM

    client = SGLangClient(app.url)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    probe = dict(seed=3, rid="g", timeout_s=60)
    greedy = SamplingParams(max_new_tokens=5, temperature=0.0)
    before = client.generate_one([5, 6, 7], greedy, **probe)
    push = WeightPush("distributed", (ServerTarget(app.url),), "9", bucket_bytes=32 << 10,
                      group_backend="gloo", master_address="127.0.0.1", timeout_s=120)  # fmt: skip
    client.pause("abort")
    report = send_weights(iter_buckets(model.state_dict().items(), push.bucket_bytes), push)
    client.resume()
    assert report.buckets > 1 and client.weight_version() == "9"
    after = client.generate_one([5, 6, 7], greedy, expected_version="9", **probe)
    assert after.logprobs != before.logprobs
