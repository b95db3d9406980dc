"""``python -m spade_standin_server`` takes the command line of ``python -m
sglang.launch_server`` (the flags the ray backend passes) and serves SGLang's native HTTP
endpoints over :class:`~spade_standin_engine.StandinEngine`, with the standard library's HTTP
server. The ray tests launch it where a GPU machine launches SGLang; the contract tests check
the same payloads against SGLang's own app (``spade_sglang_app``)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from spade_standin_engine import StandinEngine


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--random-seed", type=int)
    p.add_argument("--weight-version", default="default")
    p.add_argument("--context-length", type=int)
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--enable-deterministic-inference", action="store_true")
    p.add_argument("--enable-memory-saver", action="store_true")
    args, _unknown = p.parse_known_args(argv)
    return args


def serve(args: argparse.Namespace) -> None:
    from spade_train.backends.weight_sync import open_group

    engine = StandinEngine(args.model_path, args.weight_version, args.context_length)

    def opener(backend, init_method, world_size, rank, group_name):
        host, port = init_method.removeprefix("tcp://").rsplit(":", 1)
        return open_group(backend, host, int(port), world_size, rank, group_name, 120.0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except BrokenPipeError:
                pass

        def do_GET(self) -> None:
            if self.path == "/health":
                return self._send(200, {})
            if self.path in ("/model_info", "/get_model_info"):
                return self._send(
                    200, {"model_path": engine.model_path, "weight_version": engine.version}
                )
            if self.path in ("/server_info", "/get_server_info"):
                return self._send(
                    200,
                    {
                        "context_length": engine.context_length,
                        "tp_size": args.tp_size,
                        "served": engine.served,
                        "aborted": engine.aborted,
                        "active": engine.active,
                    },
                )
            self._send(404, {"error": "no such endpoint"})

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else {}
            ok = {"success": True, "message": "ok"}
            try:
                if self.path == "/generate":
                    return self._send(
                        200,
                        engine.generate(
                            body["input_ids"], body["sampling_params"], body.get("rid", "")
                        ),
                    )
                if self.path == "/pause_generation":
                    engine.pause(body.get("mode", "abort"))
                elif self.path == "/continue_generation":
                    engine.resume()
                elif self.path == "/flush_cache":
                    return self._send(200, {})
                elif self.path == "/init_weights_update_group":
                    engine.init_group(body, opener)
                elif self.path == "/destroy_weights_update_group":
                    engine.destroy_group(body["group_name"])
                elif self.path == "/update_weights_from_distributed":
                    engine.update_distributed(body)
                elif self.path == "/update_weights_from_tensor":
                    engine.update_tensor(body)
                elif self.path == "/update_weights_from_disk":
                    engine.update_disk(body)
                elif self.path == "/update_weight_version":
                    engine.version = body["new_version"]
                elif self.path in (
                    "/abort_request",
                    "/release_memory_occupation",
                    "/resume_memory_occupation",
                ):
                    pass
                else:
                    return self._send(404, {"error": "no such endpoint"})
            except ValueError as exc:
                return self._send(400, {"error": {"message": str(exc)}})
            except Exception as exc:
                return self._send(
                    400, {"success": False, "message": f"{type(exc).__name__}: {exc}"}
                )
            self._send(200, ok)

    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    serve(parse_args(sys.argv[1:]))
