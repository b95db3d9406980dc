"""Wall time of the checkpoint server ``spade-eval run --ckpt`` starts, on the same requests.

    uv run python packages/spade-eval/benchmarks/bench_serve.py --model tiny:qwen3 --n 32
    uv run python packages/spade-eval/benchmarks/bench_serve.py --model tiny:qwen3 --n 32 \\
        --server-argv 'python OLD_SERVE.py --model {ckpt} --port {port}'

``--model`` is a spade-train model spec (``tiny:qwen3``, ``embedded:smollm2-135m``) or a
checkpoint directory. Without ``--server-argv`` the server is ``server_command("transformers")``
(``transformers serve``, continuous batching; ``--no-cb`` drops that flag); with it, any
command, ``{ckpt}`` and ``{port}`` filled in. The requests are ``--n`` single-turn chats sent
by ``OpenAIClient`` (the client ``run --ckpt`` uses) at ``--concurrency``, greedy,
``--max-tokens`` each. Prints one JSON line: startup seconds (start to ``/v1/models``), request
seconds, requests/s and the replies' distinct count.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

from spade_eval.models import OpenAIClient
from spade_eval.server import OFFLINE_ENV, ServerCommand, free_port, launched, server_command


def checkpoint(spec: str) -> str:
    """A local directory for ``spec`` (spade-train builds tiny models and caches SmolLM2)."""
    if Path(spec).is_dir():
        return spec
    from spade_train.models import resolve_model

    return str(resolve_model(spec))


def command(args: argparse.Namespace, ckpt: str, port: int) -> ServerCommand:
    """The server to measure."""
    if args.server_argv:
        argv = [a.format(ckpt=ckpt, port=port) for a in shlex.split(args.server_argv)]
        return ServerCommand("custom", [sys.executable if a == "python" else a for a in argv],
                             OFFLINE_ENV)  # fmt: skip
    cmd = server_command("transformers", ckpt, port)
    if args.no_cb:
        return ServerCommand(cmd.kind, [a for a in cmd.argv if a != "--continuous-batching"],
                             cmd.env)  # fmt: skip
    return cmd


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="tiny:qwen3")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--server-argv", help="server command with {ckpt} and {port}")
    p.add_argument("--no-cb", action="store_true", help="transformers serve without batching")
    args = p.parse_args()
    ckpt = checkpoint(args.model)
    port = free_port()
    chats = [[{"role": "user", "content": f"What is {i} + {i}? Answer briefly."}]
             for i in range(args.n)]  # fmt: skip
    sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": args.max_tokens}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with launched(command(args, ckpt, port), port, Path(tmp) / "server.log") as url:
            t1 = time.perf_counter()
            client = OpenAIClient(url, ckpt, concurrency=args.concurrency, timeout_s=600)
            replies = client.complete(chats, sampling)
            t2 = time.perf_counter()
    print(json.dumps({"model": args.model, "server": args.server_argv or "transformers serve"
                      + (" (no CB)" if args.no_cb else " --continuous-batching"),
                      "n": args.n, "max_tokens": args.max_tokens,
                      "concurrency": args.concurrency, "startup_s": round(t1 - t0, 1),
                      "requests_s": round(t2 - t1, 2), "requests_per_s": round(args.n / (t2 - t1), 2),
                      "distinct_replies": len(set(replies))}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
