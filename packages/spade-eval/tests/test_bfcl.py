"""BFCL v4 through bfcl-eval in its own environment: score files read back, skips with their
reason, and (where the environment exists) a real bfcl generate + evaluate against localhost."""

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from spade_eval import CallableClient, EvalDataError, OpenAIClient, evaluate
from spade_eval.suites import bfcl

FIXTURE = Path(__file__).parent / "fixtures" / "bfcl_project"


def test_read_scores_from_official_layout():
    records, metrics = bfcl.read_scores(FIXTURE)
    by_id = {r["item_id"]: r["score"] for r in records}
    assert by_id == {"multiple/multiple_0": 1.0, "multiple/multiple_1": 1.0,
                     "simple_python/simple_python_0": 1.0, "simple_python/simple_python_1": 0.0,
                     "simple_python/simple_python_2": 1.0}  # fmt: skip
    failed = [r for r in records if r["score"] == 0.0][0]
    assert failed["detail"] == "value_error:others"
    # bfcl's own overall row (a partial run counts the categories not run as 0)
    assert metrics == pytest.approx(
        {"bfcl_overall_acc": 0.0306, "bfcl_live_acc": 0.0, "bfcl_multi_turn_acc": 0.0}
    )


def test_skipped_without_an_endpoint(tmp_path):
    client = CallableClient(lambda batch, s: ["x"] * len(batch))
    res = evaluate(client, {"suites": {"bfcl": {}}}, tmp_path, progress=False)
    assert res["skipped"] == {
        "bfcl": "bfcl needs an OpenAI-compatible endpoint (--base-url or --ckpt)"
    }
    assert "bfcl" not in res["suites"]


def test_missing_environment_names_it_and_the_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("SPADE_BFCL_VENV", str(tmp_path / "nope"))
    client = OpenAIClient("http://127.0.0.1:9", "m")
    with pytest.raises(EvalDataError, match=r"nope/bin/bfcl; run `spade-eval setup-bfcl`"):
        evaluate(client, {"suites": {"bfcl": {}}}, tmp_path / "o", progress=False)


MAKE_TOKENIZER = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<|im_end|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(["tool call json"] * 4, trainer)
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                        model_max_length=32768).save_pretrained(out)
(out / "config.json").write_text(json.dumps({"model_type": "qwen3", "max_position_embeddings": 32768}))
"""
IDS = {"simple_python": ["simple_python_0", "simple_python_1", "simple_python_2"],
       "multiple": ["multiple_0", "multiple_1"], "parallel": ["parallel_0"]}  # fmt: skip


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [("http://127.0.0.1:8123", "127.0.0.1", "8123"), ("http://127.0.0.1:8123/v1/", "127.0.0.1", "8123"),
     ("http://gpu-node/v1", "gpu-node", "80")],
)  # fmt: skip
def test_the_endpoint_url_becomes_bfcls_host_and_port(url, host, port):
    client = OpenAIClient(url, "m")  # root or /v1: bfcl-eval is given the same server
    assert client.base_url.endswith("/v1")
    env = bfcl.local_server(client.base_url)
    assert env == {"LOCAL_SERVER_ENDPOINT": host, "LOCAL_SERVER_PORT": port}


class CompletionServer:
    """``/v1/completions`` (bfcl's local-inference path) answering from the ground truth."""

    def __init__(self, data_dir: Path, right: bool):
        truth = {}
        for cat in IDS:
            answers = {}
            for line in (data_dir / "possible_answer" / f"BFCL_v4_{cat}.json").open():
                row = json.loads(line)
                answers[row["id"]] = row["ground_truth"]
            for line in (data_dir / f"BFCL_v4_{cat}.json").open():
                row = json.loads(line)
                truth[row["question"][0][-1]["content"]] = answers[row["id"]]

        def reply(prompt):
            for question, gt in truth.items():
                if question in prompt:
                    calls = [{"name": n, "arguments": {k: v[0] for k, v in a.items() if v[0] != ""}}
                             for call in gt for n, a in call.items()]  # fmt: skip
                    if not right:
                        calls = [{"name": c["name"] + "_x", "arguments": {}} for c in calls]
                    return "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)
            return "no idea"

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def send(self, obj):
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.send({"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.send({"id": "c", "object": "text_completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "text": reply(body.get("prompt", "")),
                                        "finish_reason": "stop", "logprobs": None}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("right", [True, False])
def test_bfcl_eval_end_to_end_against_localhost(tmp_path, right, monkeypatch):
    if not bfcl.bfcl_executable().is_file():
        pytest.skip(f"no bfcl-eval environment at {bfcl.venv_dir()}; run `spade-eval setup-bfcl`")
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    python = bfcl.venv_dir() / "bin" / "python"
    tok = tmp_path / "tok"
    subprocess.run([str(python), "-c", MAKE_TOKENIZER, str(tok)], check=True, timeout=120)
    data_dir = next((bfcl.venv_dir() / "lib").glob("python*/site-packages/bfcl_eval/data"))
    server = CompletionServer(data_dir, right)
    try:
        cfg = {"sampling": {"temperature": 0.0},
               "suites": {"bfcl": {"categories": [*IDS, "web_search"], "ids": IDS,
                                   "tokenizer_path": str(tok), "num_threads": 2}}}  # fmt: skip
        res = evaluate(OpenAIClient(server.url, "m"), cfg, tmp_path / "out", progress=False)
    finally:
        server.close()
    assert res["suites"]["bfcl"]["n"] == 6
    assert res["suites"]["bfcl"]["mean"] == (1.0 if right else 0.0)
    assert res["metrics"]["bfcl_web_search_skipped"] == 1.0
    assert "bfcl_overall_acc" in res["metrics"]
