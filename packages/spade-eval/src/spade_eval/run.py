"""``spade-eval run`` (or ``python -m spade_eval.run``): score a checkpoint or an endpoint on suites."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import spade_envs as se

from .errors import EvalConfigError, SpadeEvalError
from .models import HFClient, ModelClient, OpenAIClient
from .policy import scalar_metrics
from .runner import evaluate, load_config
from .server import SERVERS, free_port, launched, server_command


def parser() -> argparse.ArgumentParser:
    """The runner's argument parser."""
    p = argparse.ArgumentParser(prog="spade-eval run", description=__doc__)
    p.add_argument("--model", help="checkpoint dir (in process), endpoint URL, or served name")
    p.add_argument("--ckpt", help="checkpoint dir: start an inference server for it, then stop it")
    p.add_argument(
        "--server",
        default="auto",
        choices=SERVERS,
        help="for --ckpt: sglang (GPU), transformers, or auto (sglang when a GPU is present)",
    )
    p.add_argument("--tp", type=int, default=1, help="SGLang tensor parallelism")
    p.add_argument("--startup-timeout-s", type=float, default=600.0)
    p.add_argument(
        "--user-base-url",
        help="OpenAI-compatible endpoint of the user simulator (tau2-bench, ACEBench agent); "
        "key from SPADE_USER_API_KEY",
    )
    p.add_argument(
        "--wandb",
        action="store_true",
        help="log the metrics to W&B (WANDB_PROJECT, WANDB_ENTITY; extra `wandb`)",
    )
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


def log_wandb(summary: dict[str, Any], args: argparse.Namespace) -> None:
    """One W&B run with the flat metrics and the results file."""
    try:
        import wandb
    except ImportError:
        raise EvalConfigError("--wandb needs pip install 'spade-eval[wandb]'") from None
    run = wandb.init(project=os.environ.get("WANDB_PROJECT", "spade"),
                     entity=os.environ.get("WANDB_ENTITY") or None, group="offline-eval",
                     name=str(summary.get("model")), config=vars(args))  # fmt: skip
    run.log(scalar_metrics(summary))
    run.summary["skipped"] = json.dumps(summary.get("skipped", {}))
    run.finish()


def with_tokenizer(config: dict[str, Any], ckpt: str) -> dict[str, Any]:
    """Point bfcl's tokenizer at the checkpoint being served (it formats prompts itself)."""
    suites = dict(config.get("suites") or {})
    if "bfcl" in suites:
        suites["bfcl"] = {"tokenizer_path": ckpt, **(suites["bfcl"] or {})}
    return {**config, "suites": suites}


def run_ckpt(
    args: argparse.Namespace, config: dict[str, Any], suites: list[str] | None
) -> dict[str, Any]:
    """Serve ``--ckpt``, evaluate through the server, stop it."""
    if not os.path.isdir(args.ckpt):
        raise SpadeEvalError(f"--ckpt {args.ckpt}: not a directory; pass a checkpoint directory")
    port = free_port()
    cmd = server_command(args.server, args.ckpt, port, tp=args.tp)
    if suites and "bfcl" in suites and "bfcl" not in (config.get("suites") or {}):
        config = {**config, "suites": {**(config.get("suites") or {}), "bfcl": {}}}
    config = with_tokenizer(config, args.ckpt)
    log = Path(args.out) / f"server-{cmd.kind}.log"
    with launched(cmd, port, log, args.startup_timeout_s) as url:
        client = OpenAIClient(url, args.ckpt, concurrency=args.concurrency,
                              timeout_s=args.timeout_s, max_retries=args.max_retries)  # fmt: skip
        return evaluate(client, config, args.out, suites=suites, limit=args.limit,
                        samples=args.samples, progress=not args.no_progress)  # fmt: skip


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


def user_base_url(url: str) -> str:
    """``--user-base-url`` as the endpoint convention has it (root or ``/v1`` → ``.../v1``)."""
    try:
        return se.normalise_base_url(url)
    except se.EndpointError as exc:
        raise EvalConfigError(f"--user-base-url {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one line and exit 2."""
    args = parser().parse_args(argv)
    try:
        if args.user_base_url:  # the user simulator's server, normalised to its .../v1
            os.environ["SPADE_USER_BASE_URL"] = user_base_url(args.user_base_url)
        config = load_config(args.config)
        suites = [s.strip() for s in args.suites.split(",") if s.strip()] if args.suites else None
        if args.ckpt:
            summary = run_ckpt(args, config, suites)
        elif not args.model:
            raise EvalConfigError("pass --ckpt DIR, --model DIR, or --model NAME --base-url URL")
        else:
            summary = evaluate(make_client(args), config, args.out, suites=suites,
                               limit=args.limit, samples=args.samples,
                               progress=not args.no_progress)  # fmt: skip
        if args.wandb:
            log_wandb(summary, args)
    except SpadeEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, s in summary["suites"].items():
        print(f"{name}: {s['mean']:.4f} ± {s['stderr']:.4f} (n={s['n']})")
    for name, reason in summary.get("skipped", {}).items():
        print(f"{name}: skipped ({reason})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
