"""Local decoding against the machine's own bounds: batch 1 against the memory roof, batch 32
against the compute bound (issue 23's two decode goals), each bound measured in the same run.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_decode.py \
        [--model embedded:smollm2-135m] [--rounds 3] [--new 48] [--threads 2]

A decoding step is timed without the prefill: each batch is generated with 1 and with
``--new`` new tokens, and the difference is divided by the steps the longer call ran (its
longest completion; finished rows keep being computed as padding, so every step processes
the whole batch). Both ``LocalBackend.generate`` and plain ``transformers.generate`` on the
same weights (dynamic cache, default sampling processors) are timed, alternating, with the
same prompts and seed.

- Memory roof (batch 1): the bytes one step must read (every weight once, tied ones once,
  plus the key/value cache at the batch's mean context) over the read bandwidth of
  ``torch.sum`` on a 512 MiB tensor with the same thread count.
- Compute bound (batch 32): the floating-point operations of one step (2 per weight of every
  linear layer, the output projection included, per row, plus the attention's products at
  the mean context) over the fastest float32 matrix product measured here: the largest of a
  1,024-cube product and the model's own linear shapes at 32 rows with the weight in cache.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from spade_train.backends import make_backend
from spade_train.types import SamplingParams

STORY = (
    "Write a long story about a lighthouse keeper and a storm. Begin: The night the lamp failed,"
)


def read_bandwidth() -> float:
    """Bytes per second ``torch.sum`` reads (best of 5) from a 512 MiB float32 tensor."""
    data = torch.ones(128 * 1024 * 1024)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - started)
    return data.numel() * 4 / best


def gemm_peak(model: torch.nn.Module) -> float:
    """Fastest float32 matrix product measured here, in FLOP/s."""
    shapes = {(1024, 1024, 1024)}
    shapes |= {
        (32, m.in_features, m.out_features)
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    }
    best = 0.0
    for rows, k, n in shapes:
        x, w = torch.randn(rows, k), torch.randn(n, k)
        calls = max(3, int(2e9 // (2 * rows * k * n)))
        torch.nn.functional.linear(x, w)
        started = time.perf_counter()
        for _ in range(calls):
            torch.nn.functional.linear(x, w)
        best = max(best, 2 * rows * k * n * calls / (time.perf_counter() - started))
    return best


def step_costs(model: torch.nn.Module, context: float, rows: int) -> tuple[float, float]:
    """(bytes read, floating-point operations) of one decoding step at ``rows`` rows."""
    cfg = model.config
    weights = {p.data_ptr(): p.numel() * p.element_size() for p in model.parameters()}
    width = next(model.parameters()).element_size()  # bytes per cached key/value number
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * width * context * rows
    linear = sum(
        2 * m.in_features * m.out_features
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    )
    attention = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim * context
    return sum(weights.values()) + kv, rows * (linear + attention)


class Plain:
    """transformers' own generate on the backend's weights (the baseline)."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def generate(self, convs, params: SamplingParams) -> list[list[int]]:
        tok, model = self.backend.tokenizer, self.backend.model
        texts = [
            tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in convs
        ]
        batch = tok(
            texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
        )
        torch.manual_seed(params.seed or 0)
        out = model.generate(**batch, max_new_tokens=params.max_new_tokens, do_sample=True,
                             temperature=params.temperature, top_p=1.0, top_k=0,
                             pad_token_id=tok.pad_token_id)  # fmt: skip
        return out[:, batch["input_ids"].shape[1] :].tolist()


def timed(gen, convs, new: int) -> tuple[float, int, float]:
    """(seconds, steps, mean prompt length) of one call with ``new`` new tokens."""
    params = SamplingParams(max_new_tokens=new, temperature=1.0, seed=3)
    started = time.perf_counter()
    out = gen.generate(convs, params)
    seconds = time.perf_counter() - started
    rows = [o.completion_ids if hasattr(o, "completion_ids") else o for o in out]
    prompt = [len(o.prompt_ids) for o in out if hasattr(o, "prompt_ids")] or [0]
    return seconds, max(len(r) for r in rows), statistics.mean(prompt)


def step_ms(gen, convs, new: int, rounds: int) -> tuple[float, float]:
    """(median ms per decoding step, mean context of the steps) for one batch."""
    steps: list[float] = []
    context = 0.0
    for _ in range(rounds):
        one, _, prompt = timed(gen, convs, 1)
        many, ran, _ = timed(gen, convs, new)
        steps.append((many - one) / max(1, ran - 1) * 1e3)
        context = prompt + ran / 2 if prompt else context
    return statistics.median(steps), context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new", type=int, default=48, help="new tokens of the long call")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    backend = make_backend(
        "local", model=args.model, gen_batch_size=32, threads=args.threads, reuse_kv=False
    )
    plain = Plain(backend)
    model = backend.model
    timed(backend, [[{"role": "user", "content": STORY}]], 4)  # warm up
    bandwidth, peak = read_bandwidth(), gemm_peak(model)
    print(f"{args.model}: {args.threads} threads, read {bandwidth / 1e9:.1f} GB/s, fastest "
          f"float32 product {peak / 1e9:.0f} GFLOP/s, {args.rounds} rounds, medians")  # fmt: skip
    for rows in (1, 32):
        convs = [[{"role": "user", "content": f"{STORY} (version {i})"}] for i in range(rows)]
        ours, context = step_ms(backend, convs, args.new, args.rounds)
        base, _ = step_ms(plain, convs, args.new, args.rounds)
        nbytes, flops = step_costs(model, context, rows)
        roof_ms, bound_ms = nbytes / bandwidth * 1e3, flops / peak * 1e3
        print(f"  batch {rows:2d} (context ~{context:.0f}): LocalBackend {ours:6.1f} ms/step "
              f"({rows * 1e3 / ours:5.0f} tok/s), plain transformers {base:6.1f} ms/step "
              f"(ours {base / ours:.2f}x)")  # fmt: skip
        print(f"           memory roof {roof_ms:5.1f} ms: {roof_ms / ours:4.0%} of it; "
              f"compute bound {bound_ms:5.1f} ms: {bound_ms / ours:4.0%} of it")  # fmt: skip
    print(
        "  goals (issue 23): batch 1 >= 80% of the memory roof, batch 32 >= 60% of the compute bound"
    )


if __name__ == "__main__":
    main()
