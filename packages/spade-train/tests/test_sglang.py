"""The SGLang client against a real localhost HTTP server speaking SGLang's endpoints."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from spade_train.backends import BackendError
from spade_train.backends.sglang import (
    SGLangClient,
    generate_chat,
    launch_engine,
    render_prompt,
    sampling_payload,
)
from spade_train.types import SamplingParams

torch.set_num_threads(1)
EOS = 2  # id of <|im_end|>, the third special token of the test tokenizer
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class _State:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.fail_health = 0
        self.loaded: str | None = None


class _Handler(BaseHTTPRequestHandler):
    state: _State

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up (the timeout test)
            pass

    def do_GET(self) -> None:
        if self.path == "/health":
            if self.state.fail_health > 0:
                self.state.fail_health -= 1
                return self._send(503, {"error": "warming up"})
            return self._send(200, {})
        self._send(404, {"error": "no such endpoint"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.state.calls.append((self.path, body))
        if self.path == "/update_weights_from_disk":
            ok = body["model_path"].startswith("/")
            self.state.loaded = body["model_path"] if ok else None
            return self._send(200, {"success": ok, "message": "" if ok else "not absolute"})
        if self.path != "/generate":
            return self._send(404, {"error": "no such endpoint"})
        sp = body["sampling_params"]
        if sp["max_new_tokens"] == 999:
            time.sleep(2)
        out = []
        for ids in body["input_ids"]:
            # a deterministic "model": echo the last tokens backwards, then end-of-turn
            comp = list(reversed(ids[-3:])) + [EOS]
            finish = "stop"
            if len(comp) > sp["max_new_tokens"]:
                comp, finish = comp[: sp["max_new_tokens"]], "length"
            lps = [-0.25 * (k + 1) for k in range(len(comp))]
            out.append(
                {
                    "text": "",
                    "output_ids": comp,
                    "meta_info": {
                        "output_token_logprobs": [
                            [lp, t, None] for lp, t in zip(lps, comp, strict=True)
                        ],
                        "finish_reason": {"type": finish},
                    },
                }
            )
        self._send(200, out)


@pytest.fixture()
def server():
    state = _State()
    handler = type("H", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["<unk>", "<|im_start|>", "<|im_end|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(["user assistant system hello world say a number"] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", unk_token="<unk>")
    fast.chat_template = TEMPLATE
    return fast


def test_sampling_payload_maps_our_params():
    p = sampling_payload(SamplingParams(max_new_tokens=5, temperature=0.5, top_k=0, seed=3))
    assert p == {
        "max_new_tokens": 5,
        "temperature": 0.5,
        "top_p": 1.0,
        "top_k": -1,
        "sampling_seed": 3,
    }
    assert sampling_payload(SamplingParams(top_k=4, stop=("\n",)))["stop"] == ["\n"]


def test_generate_ids_sends_ids_and_reads_logprobs(server):
    url, state = server
    client = SGLangClient(url, timeout_s=5)
    out = client.generate_ids([[1, 2, 3, 4], [9, 8]], SamplingParams(max_new_tokens=3, seed=1))
    assert out[0] == ([4, 3, 2], [-0.25, -0.5, -0.75], "length")
    assert out[1] == ([8, 9, EOS], [-0.25, -0.5, -0.75], "stop")
    path, body = state.calls[-1]
    assert path == "/generate" and body["return_logprob"] is True
    assert (
        body["input_ids"] == [[1, 2, 3, 4], [9, 8]]
        and body["sampling_params"]["sampling_seed"] == 1
    )
    assert client.generate_ids([], SamplingParams()) == []


def test_generate_chat_renders_template_and_keeps_order(server, tokenizer):
    url, _ = server
    client = SGLangClient(url, timeout_s=5)
    convs = [[{"role": "user", "content": "hello world"}], [{"role": "user", "content": "say"}]]
    gens = generate_chat(client, tokenizer, convs, SamplingParams(max_new_tokens=8))
    for conv, gen in zip(convs, gens, strict=True):
        assert gen.prompt_ids == render_prompt(tokenizer, conv, None)
        assert tokenizer.decode(gen.prompt_ids).endswith("<|im_start|>assistant\n")
        assert gen.completion_ids[-1] == tokenizer.eos_token_id
        assert len(gen.logprobs) == len(gen.completion_ids) and gen.finish_reason == "stop"
        assert "<|im_end|>" not in gen.text
    assert gens[0].prompt_ids != gens[1].prompt_ids


def test_health_retries_then_fails_clearly(server):
    url, state = server
    state.fail_health = 1
    SGLangClient(url, retries=2).health()  # one 503, then healthy
    state.fail_health = 10
    with pytest.raises(BackendError, match="failed after 2 tries"):
        SGLangClient(url, retries=1).health()
    with pytest.raises(BackendError, match="is the server up"):
        SGLangClient("http://127.0.0.1:9", retries=0, timeout_s=1).health()
    with pytest.raises(BackendError, match="http://"):
        SGLangClient("localhost:30000")


def test_timeouts_do_not_hang(server):
    url, _ = server
    client = SGLangClient(url, timeout_s=0.3, retries=1)
    start = time.monotonic()
    with pytest.raises(BackendError, match="ReadTimeout"):
        client.generate_ids([[1, 2]], SamplingParams(max_new_tokens=999))
    assert time.monotonic() - start < 1.9


def test_update_weights_from_disk(server):
    url, state = server
    client = SGLangClient(url)
    client.update_weights_from_disk("/ckpt/step-3")
    assert state.loaded == "/ckpt/step-3"
    with pytest.raises(BackendError, match="not absolute"):
        client.update_weights_from_disk("relative/dir")


def test_launch_engine_without_sglang_or_gpu_is_a_clear_error():
    if importlib.util.find_spec("sglang") is not None and torch.cuda.is_available():
        pytest.skip("sglang and a GPU are present: the GPU test covers launch_engine")
    with pytest.raises(BackendError, match="sglang"):
        launch_engine("/nonexistent")


@pytest.mark.gpu
def test_engine_generation_and_weight_update(tmp_path, tokenizer):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: SGLang serves only on GPUs")
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed: pip install 'sglang[all]' on the GPU machine")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(tmp_path / "a")
    tokenizer.save_pretrained(tmp_path / "a")
    engine = launch_engine(str(tmp_path / "a"), mem_fraction_static=0.3, log_level="error")
    try:
        convs = [[{"role": "user", "content": "hello world"}]] * 4
        params = SamplingParams(max_new_tokens=16, temperature=0.0)
        start = time.monotonic()
        before = generate_chat(engine, tokenizer, convs, params)
        n_tok = sum(len(g.completion_ids) for g in before)
        print(f"sglang tokens/s: {n_tok / (time.monotonic() - start):.1f}")
        assert all(len(g.logprobs) == len(g.completion_ids) > 0 for g in before)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        model.save_pretrained(tmp_path / "b")
        start = time.monotonic()
        engine.update_weights_from_disk(str(tmp_path / "b"))
        print(f"sglang update_weights_from_disk s: {time.monotonic() - start:.2f}")
        after = generate_chat(engine, tokenizer, convs, params)
        assert [g.logprobs for g in after] != [g.logprobs for g in before]
    finally:
        engine.close()
