"""``python -m spade_eval.serve --model CKPT --port P``: a small OpenAI-compatible server over a
local checkpoint through transformers (`HFClient`), for machines without a GPU.

Serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions`` (raw
prompts, as bfcl's local-inference path sends). One request is generated at a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .errors import SpadeEvalError
from .models import HFClient

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens")


def handler_for(client: HFClient, served_name: str) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to ``client``."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def send_json(self, status: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/health"):
                self.send_json(200, {"object": "list",
                                     "data": [{"id": served_name, "object": "model"}]})  # fmt: skip
            else:
                self.send_json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sampling = {k: body[k] for k in SAMPLING_KEYS if body.get(k) is not None}
                with lock:
                    if self.path.rstrip("/") == "/v1/chat/completions":
                        text = client.complete([body["messages"]], sampling)[0]
                        choice = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}  # fmt: skip
                    elif self.path.rstrip("/") == "/v1/completions":
                        prompt = body["prompt"]
                        text = client.complete_text([prompt if isinstance(prompt, str) else prompt[0]],
                                                    sampling)[0]  # fmt: skip
                        choice = {"index": 0, "finish_reason": "stop", "text": text,
                                  "logprobs": None}  # fmt: skip
                    else:
                        self.send_json(404, {"error": f"no route {self.path}"})
                        return
            except (ValueError, KeyError, TypeError) as exc:
                self.send_json(400, {"error": f"bad request: {exc}"})
                return
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            self.send_json(200, {"id": "spade-eval", "object": "chat.completion", "created": 0,
                                 "model": served_name, "choices": [choice], "usage": usage})  # fmt: skip

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve until killed; errors print one line and exit 2."""
    p = argparse.ArgumentParser(prog="python -m spade_eval.serve", description=__doc__)
    p.add_argument("--model", required=True, help="checkpoint directory")
    p.add_argument("--served-model-name", help="name reported by /v1/models (default --model)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args(argv)
    try:
        client = HFClient(args.model, batch_size=args.batch_size)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer(
        (args.host, args.port), handler_for(client, args.served_model_name or args.model)
    )
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
