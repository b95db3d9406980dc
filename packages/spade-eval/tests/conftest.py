"""Shared fixtures: a localhost OpenAI-compatible chat server answering through a function."""

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


class ChatServer:
    """``POST /v1/chat/completions`` answered by ``reply(messages, body)``; bodies are kept."""

    def __init__(self, reply: Callable[[list[dict], dict], str]) -> None:
        self.bodies: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.bodies.append(body)
                content = reply(body["messages"], body)
                data = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": content}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat_server() -> Iterator[Callable[[Callable[[list[dict], dict], str]], ChatServer]]:
    """Start servers with ``chat_server(reply)``; all are stopped after the test."""
    started: list[ChatServer] = []

    def start(reply: Callable[[list[dict], dict], str]) -> ChatServer:
        started.append(ChatServer(reply))
        return started[-1]

    yield start
    for s in started:
        s.close()


@pytest.fixture
def workspace(monkeypatch) -> Path:
    """``WORKSPACE_DIR`` pointing at the official-layout fixtures."""
    monkeypatch.setenv("WORKSPACE_DIR", str(FIXTURES / "workspace"))
    return FIXTURES / "workspace"


TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> str:
    """A tiny randomly initialised Llama checkpoint with a chat template (needs the hf extra)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.set_num_threads(1)
    torch.manual_seed(0)
    words = ["<pad>", "<eos>", "<unk>", "<user>", "<assistant>", "<system>"]
    words += [f"w{i}" for i in range(40)] + ["hello", "world", "2+2", "?"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    fast.chat_template = TEMPLATE
    cfg = transformers.LlamaConfig(
        vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("tiny")
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return str(path)
