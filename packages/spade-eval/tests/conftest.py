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
