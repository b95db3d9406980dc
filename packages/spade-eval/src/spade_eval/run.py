"""``python -m spade_eval.run``: score a checkpoint or an endpoint on suites (see README)."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import SpadeEvalError
from .models import HFClient, ModelClient, OpenAIClient
from .runner import evaluate, load_config


def parser() -> argparse.ArgumentParser:
    """The runner's argument parser."""
    p = argparse.ArgumentParser(prog="spade-eval", description=__doc__)
    p.add_argument("--model", required=True, help="checkpoint dir, endpoint URL, or served name")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint; --model is then the served name")
    p.add_argument("--suites", help="comma-separated suites (default: those in the config)")
    p.add_argument("--out", required=True, help="output directory (records.jsonl, results.json)")
    p.add_argument("--config", default="default", help="YAML path or shipped name")
    p.add_argument("--limit", type=int, help="at most N items per suite")
    p.add_argument("--samples", type=int, help="samples per item (overrides the config)")
    p.add_argument("--concurrency", type=int, default=16, help="concurrent HTTP requests")
    p.add_argument("--timeout-s", type=float, default=60.0, help="per-request timeout")
    p.add_argument("--max-retries", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=8, help="local checkpoint batch size")
    p.add_argument("--no-progress", action="store_true")
    return p


def make_client(args: argparse.Namespace) -> ModelClient:
    """An OpenAIClient for a URL / --base-url, else an HFClient for a local directory."""
    base_url = args.base_url or (
        args.model if args.model.startswith(("http://", "https://")) else None
    )
    if base_url:
        model = args.model if args.base_url else "default"
        return OpenAIClient(base_url, model, api_key=os.environ.get("OPENAI_API_KEY"),
                            concurrency=args.concurrency, timeout_s=args.timeout_s,
                            max_retries=args.max_retries)  # fmt: skip
    if not os.path.isdir(args.model):
        raise SpadeEvalError(
            f"--model {args.model}: not a directory; pass a checkpoint or --base-url"
        )
    return HFClient(args.model, batch_size=args.batch_size)


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one line and exit 2."""
    args = parser().parse_args(argv)
    try:
        config = load_config(args.config)
        suites = [s.strip() for s in args.suites.split(",") if s.strip()] if args.suites else None
        client = make_client(args)
        summary = evaluate(client, config, args.out, suites=suites, limit=args.limit,
                           samples=args.samples, progress=not args.no_progress)  # fmt: skip
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, s in summary["suites"].items():
        print(f"{name}: {s['mean']:.4f} ± {s['stderr']:.4f} (n={s['n']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
