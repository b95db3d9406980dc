"""GRPO groups in the local backend: each shared prompt prefilled once and trained once.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_groups.py \
        [--model embedded:smollm2-135m] [--rounds 2] [--new-tokens 500]

The quickstart's designer call: 2 scaffolded designer prompts (~1,300 tokens each) x 2
completions. Generation (``--gen-tokens`` new tokens, so the prefill weighs as it does in a
short call) and a train step on 4 designer samples (each prompt + ``--new-tokens`` tokens,
advantages +1/-1 per group; micro-batches of at most 2,560 tokens, as the quickstart's) run with the shared paths (``backends/shared_prefill.py``,
``backends/train_parts.py``) and without them (the baseline), alternating within each round.
Prints the medians, the ratio, and whether the sampled tokens agree.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from spade_train.backends import local, make_backend, train_parts
from spade_train.core import design as dz
from spade_train.types import SamplingParams, TrainSample


def designer_batch() -> list[list[dict[str, str]]]:
    prompts = [
        dz.build_designer_messages(skill, max_turns=3, compact=True, scaffold=True)
        for skill in ("Math", "Logic")
    ]
    return [p for p in prompts for _ in range(2)]


def samples(prompts: list[list[int]], new_tokens: int, seed: int) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for i, prompt in enumerate(prompts):
        tail = [rng.randrange(1000, 20000) for _ in range(new_tokens)]
        ids = prompt + tail
        mask = [0] * len(prompt) + [1] * new_tokens
        old = [-10.0 * m for m in mask]  # about a random token's log-prob
        out.append(TrainSample(ids, mask, old, float((-1) ** i), "designer"))
    return out


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gen-tokens", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=500)
    args = parser.parse_args()
    backend = make_backend(  # micro-batches as the quickstart cuts them
        "local", model=args.model, gen_batch_size=4, threads=2, lr=1e-7, micro_batch_tokens=2560
    )
    convs = designer_batch()
    params = SamplingParams(max_new_tokens=args.gen_tokens, temperature=0.3, top_p=0.95, seed=1)
    share_rows, min_shared = local.distinct_rows, train_parts.MIN_SHARED
    modes = {
        "separate (before)": (lambda ids, mask: None, 10**9),
        "shared": (share_rows, min_shared),
    }
    gen_times: dict[str, list[float]] = {m: [] for m in modes}
    step_times: dict[str, list[float]] = {m: [] for m in modes}
    tokens: dict[str, list[list[int]]] = {}
    batch: list[TrainSample] = []
    for _ in range(args.rounds):
        for mode, (rows, shared) in modes.items():
            local.distinct_rows = rows  # type: ignore[assignment]
            train_parts.MIN_SHARED = shared
            took, gens = timed(lambda: backend.generate(convs, params))
            gen_times[mode].append(took)
            tokens[mode] = [g.completion_ids for g in gens]  # type: ignore[attr-defined]
            if not batch:
                prompts = [g.prompt_ids for g in gens]  # type: ignore[attr-defined]
                batch = samples(prompts, args.new_tokens, seed=2)
            step_times[mode].append(timed(lambda b=batch: backend.train_step(b))[0])
    local.distinct_rows, train_parts.MIN_SHARED = share_rows, min_shared  # type: ignore[assignment]
    width = len(batch[0].input_ids) - args.new_tokens
    print(
        f"2 prompts x 2 completions, ~{width} prompt tokens each; medians of {args.rounds} rounds"
    )
    for label, times in ((f"generate ({args.gen_tokens} new tokens)", gen_times),
                         (f"train step (+{args.new_tokens} tokens each)", step_times)):  # fmt: skip
        base, fast = (statistics.median(times[m]) for m in modes)
        print(f"  {label:34s} before {base:6.2f} s   shared {fast:6.2f} s   {base / fast:.2f}x")
    same = tokens["shared"] == tokens["separate (before)"]
    print(f"  same sampled tokens: {same}")


if __name__ == "__main__":
    main()
