"""spade_envs.Endpoint against a real OpenAI-compatible server on 127.0.0.1, through the real
openai SDK: the base-URL convention, the key, replies in order, the SDK's retries on 5xx, 429
and timeouts, and every failure as one EndpointError naming the URL."""

from __future__ import annotations

import json
import pickle
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import spade_envs as se

pytest.importorskip("openai")

HI = [{"role": "user", "content": "hi"}]


class FaultyServer:
    """``POST /v1/chat/completions`` echoing the last message; ``faults`` are served first, one
    per request: an HTTP status, ``"slow"`` (answer after ``stall_s``) or ``"garbage"`` (200
    with a body that is not a chat completion). ``peak`` is the most requests seen at once."""

    def __init__(self, faults=(), stall_s=1.0, latency_s=0.0):
        self.faults, self.stall_s, self.latency_s = list(faults), stall_s, latency_s
        self.requests: list[tuple[str, dict, str | None]] = []
        self.lock = threading.Lock()
        self.active = self.peak = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append((self.path, body, self.headers.get("Authorization")))
                    fault = outer.faults.pop(0) if outer.faults else None
                    outer.active += 1
                    outer.peak = max(outer.peak, outer.active)
                try:
                    self._answer(fault, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a slow answer
                finally:
                    with outer.lock:
                        outer.active -= 1

            def _answer(self, fault, body):
                if isinstance(fault, int):
                    self._send(fault, b'{"error": {"message": "injected\\nfault"}}')
                    return
                time.sleep(outer.stall_s if fault == "slow" else outer.latency_s)
                if fault == "garbage":
                    self._send(200, b'{"object": "nothing useful"}')
                    return
                reply = {"choices": [{"message": {"role": "assistant", "content": "echo " + body["messages"][-1]["content"]}}]}  # fmt: skip
                self._send(200, json.dumps(reply).encode())

            def _send(self, status, data):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    started: list[FaultyServer] = []

    def start(*faults, **kw) -> FaultyServer:
        started.append(FaultyServer(faults, **kw))
        return started[-1]

    yield start
    for s in started:
        s.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://h:8000", "http://h:8000/v1"),
        ("http://h:8000/", "http://h:8000/v1"),
        ("http://h:8000/v1", "http://h:8000/v1"),
        ("  https://api.example.com/v1/ ", "https://api.example.com/v1"),
        ("https://example.com/v1beta/openai/", "https://example.com/v1beta/openai"),
    ],
)
def test_one_base_url_convention(given, expected):
    assert se.normalise_base_url(given) == expected


@pytest.mark.parametrize("bad", ["127.0.0.1:8000", "ftp://h/v1", "http://", ""])
def test_a_url_that_is_not_http_is_one_line(bad):
    with pytest.raises(se.EndpointError, match="not an http") as info:
        se.Endpoint(bad, "m")
    assert "\n" not in str(info.value)


def test_root_and_v1_reach_the_same_route_with_sampling_and_key(serve, monkeypatch):
    server = serve()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with se.Endpoint(server.root, "tiny") as root:
        assert root.complete(HI, temperature=0.2, max_tokens=7, top_k=5) == "echo hi"
    monkeypatch.setenv("MY_KEY", "secret")
    with se.Endpoint(server.root + "/v1/", "tiny", api_key_env="MY_KEY") as v1:
        assert v1.complete(HI) == "echo hi"
    with se.Endpoint(server.root, "tiny", api_key="given", api_key_env="MY_KEY") as given:
        given.complete(HI)
    assert [r[0] for r in server.requests] == ["/v1/chat/completions"] * 3
    body = server.requests[0][1]
    assert body["model"] == "tiny" and body["messages"] == HI
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.2, 7, 5)
    # no key anywhere: "EMPTY" (local servers ignore it); then the variable; then the argument
    assert [r[2] for r in server.requests] == ["Bearer EMPTY", "Bearer secret", "Bearer given"]


@pytest.mark.parametrize("fault", [500, 503, 429])
def test_5xx_and_429_are_retried_by_the_sdk(serve, fault):
    server = serve(fault, fault)
    with se.Endpoint(server.root, "m", max_retries=2) as endpoint:
        assert endpoint.complete(HI) == "echo hi"
        assert endpoint.requests == 3 == len(server.requests)


def test_a_timeout_is_retried_then_a_one_line_error(serve):
    server = serve("slow", stall_s=1.0)
    with se.Endpoint(server.root, "m", timeout_s=0.3, max_retries=1) as endpoint:
        assert (
            endpoint.complete(HI) == "echo hi"
        )  # the stalled attempt timed out, the retry answered
        assert endpoint.requests == 2
    server.faults = ["slow"] * 2
    with se.Endpoint(server.root, "m", timeout_s=0.3, max_retries=1) as endpoint:
        with pytest.raises(se.EndpointError) as info:
            endpoint.complete(HI)
    message = str(info.value)
    assert message == (
        f"{server.root}/v1/chat/completions: failed after 2 attempts: no answer within 0.3 s"
    )


def test_giving_up_on_5xx_names_the_url_status_and_body_on_one_line(serve):
    server = serve(500, 500, 500)
    with se.Endpoint(server.root, "m", max_retries=2) as endpoint:
        with pytest.raises(se.EndpointError) as info:
            endpoint.complete(HI)
    message = str(info.value)
    assert message.startswith(f"{server.root}/v1/chat/completions: failed after 3 attempts: ")
    assert "HTTP 500" in message and "injected" in message and "\n" not in message
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, se.SpadeEnvsError)
    assert str(pickle.loads(pickle.dumps(info.value))) == message  # Ray and processes carry it


@pytest.mark.parametrize("status", [400, 401, 404])
def test_other_4xx_is_final_at_once(serve, status):
    server = serve(status)
    with se.Endpoint(server.root, "m", max_retries=3) as endpoint:
        with pytest.raises(se.EndpointError, match=f"completions: HTTP {status}: "):
            endpoint.complete(HI)
    assert len(server.requests) == 1


def test_a_refused_connection_and_a_malformed_body(serve):
    dead = f"http://127.0.0.1:{_closed_port()}"
    with se.Endpoint(dead, "m", max_retries=1) as endpoint:
        with pytest.raises(se.EndpointError, match="failed after 2 attempts: cannot connect"):
            endpoint.complete(HI)
        assert endpoint.requests == 2
    server = serve("garbage")
    with se.Endpoint(server.root, "m") as endpoint:
        with pytest.raises(se.EndpointError, match="not a chat completion"):
            endpoint.complete(HI)
    assert len(server.requests) == 1  # a malformed answer is not retried


def test_many_chats_run_concurrently_in_order_and_failures_stay_in_place(serve):
    server = serve(latency_s=0.2)
    chats = [[{"role": "user", "content": str(i)}] for i in range(8)]
    with se.Endpoint(server.root, "m", concurrency=4) as endpoint:
        assert endpoint.complete_many(chats) == [f"echo {i}" for i in range(8)]
    assert 2 <= server.peak <= 4
    server.faults = [400]  # the first request to arrive is refused: its chat gets the error
    with se.Endpoint(server.root, "m", concurrency=1) as endpoint:
        out = endpoint.try_many(chats[:3])
        assert isinstance(out[0], se.EndpointError) and out[1:] == ["echo 1", "echo 2"]
        server.faults = [404]
        with pytest.raises(se.EndpointError, match="HTTP 404"):
            endpoint.complete_many(chats[:2])


def test_spade_envs_imports_without_the_sdk_and_names_the_extra():
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "import spade_envs as se\n"
        "try:\n    se.Endpoint('http://127.0.0.1:9', 'm')\n"
        "except se.EndpointUnavailableError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("pip install 'spade-envs[endpoint]'")
