"""Runner throughput (items/s) against a localhost OpenAI-compatible endpoint with fixed latency.

    python packages/spade-eval/benchmarks/bench_concurrency.py [--latency-ms 50] [--max 64]

The endpoint (a ThreadingHTTPServer in its own process) sleeps ``latency_ms`` per request and
replies with a fixed answer; the runner scores a generated math suite through ``evaluate``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spade_eval import OpenAIClient, evaluate


def serve(port_queue: mp.Queue, latency_s: float) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(latency_s)
            data = json.dumps({"choices": [{"message": {"content": "\\boxed{7}"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer.request_queue_size = 256
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_queue.put(server.server_address[1])
    server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--latency-ms", type=float, default=50.0)
    p.add_argument("--max", type=int, default=64)
    p.add_argument("--rounds", type=int, default=16, help="items per level = rounds * concurrency")
    args = p.parse_args()
    q: mp.Queue = mp.Queue()
    proc = mp.Process(target=serve, args=(q, args.latency_ms / 1000), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{q.get(timeout=30)}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["WORKSPACE_DIR"] = tmp
            (Path(tmp) / "eval" / "math").mkdir(parents=True)
            n_max = max(40, args.rounds * args.max)
            rows = [json.dumps({"id": i, "problem": f"p{i}", "answer": "7"}) for i in range(n_max)]
            (Path(tmp) / "eval" / "math" / "bench.jsonl").write_text("\n".join(rows))
            base = None
            print(f"latency {args.latency_ms:.0f} ms")
            print(f"{'concurrency':>11} {'items':>6} {'items/s':>9} {'speedup':>8}")
            c = 1
            while c <= args.max:
                n = max(40, args.rounds * c)
                cfg = {"batch_size": n, "suites": {"math": {"files": ["bench.jsonl"], "limit": n}}}
                client = OpenAIClient(url, "bench", concurrency=c, timeout_s=30)
                start = time.perf_counter()
                summary = evaluate(client, cfg, Path(tmp) / f"out{c}", progress=False)
                rate = n / (time.perf_counter() - start)
                assert summary["suites"]["math"]["mean"] == 1.0
                base = base or rate
                print(f"{c:>11} {n:>6} {rate:>9.1f} {rate / base:>7.1f}x")
                c *= 2
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
