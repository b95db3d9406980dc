"""Local-backend generation in multi-turn play: key/value reuse across turns, and threads.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_generate.py \
        [--model embedded:smollm2-135m] [--episodes 16] [--turns 3] [--rounds 2] [--load] [--design] [--top-p]

Plays the same episodes (same seeds: a system prompt, a game observation, replies of up to 16
tokens, a feedback line per turn, as the quickstart's agent) with ``reuse_kv`` off (the
baseline: every turn re-encodes the whole conversation) and on, alternating, and prints the
time ratio, the prompt tokens fed to the model per new token, and whether the sampled tokens
agree. "fed per new token": prompt tokens the model ran over (padding included) per prompt
token it had not seen before (issue 23's goal: <= 1.3). ``--load`` repeats the comparison of ``threads: 2`` against ``threads: auto`` with one
CPU-bound process running beside it. ``--design`` times a designer-shaped batch (4 prompts of
~600 tokens, 520 new tokens each, as the quickstart's design call) with the block-growing
key/value cache (``backends/kv_cache.py``) against transformers' ``DynamicCache``, which
concatenates every layer's cache at every step. ``--top-p`` times the same batch with
``ExactTopP`` (``backends/top_p.py``, sorting values only) against transformers'
``TopPLogitsWarper`` (a full sort with indices every step).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from spade_train.backends import local, make_backend
from spade_train.backends.kv_cache import new_cache
from spade_train.backends.top_p import sampling_options
from spade_train.types import SamplingParams

SYSTEM = (
    "You are playing a text game. Read each observation, think briefly, then end your reply "
    "with your move. Write answers as \\boxed{...} exactly as the game asks."
)


def chats(episodes: int) -> list[list[dict[str, str]]]:
    return [
        [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"Numbers: {' '.join(str((i * 7 + k * 3) % 23) for k in range(8 + i % 5))}. "
                "How many of them are odd? You have 3 tries. Reply \\boxed{N}.",
            },
        ]
        for i in range(episodes)
    ]


def play(backend, episodes: int, turns: int) -> tuple[float, list[list[int]]]:
    convs = chats(episodes)
    params = SamplingParams(max_new_tokens=16, temperature=0.8, seed=7)
    tokens: list[list[int]] = []
    started = time.perf_counter()
    for _ in range(turns):
        gens = backend.generate(convs, params)
        tokens += [g.completion_ids for g in gens]
        convs = [
            c
            + [
                {"role": "assistant", "content": g.text},
                {"role": "user", "content": "Fewer. Try again."},
            ]
            for c, g in zip(convs, gens, strict=True)
        ]
    return time.perf_counter() - started, tokens


def compare(args, label: str, base: dict, fast: dict) -> None:
    a = make_backend("local", model=args.model, gen_batch_size=args.batch, **base)
    b = make_backend("local", model=args.model, gen_batch_size=args.batch, **fast)
    play(a, 2, 1), play(b, 2, 1)  # warm up
    a.prompt_tokens = dict.fromkeys(a.prompt_tokens, 0)
    b.prompt_tokens = dict.fromkeys(b.prompt_tokens, 0)
    times: dict[str, list[float]] = {"base": [], "fast": []}
    same = True
    for _ in range(args.rounds):
        ta, tok_a = play(a, args.episodes, args.turns)
        tb, tok_b = play(b, args.episodes, args.turns)
        times["base"].append(ta)
        times["fast"].append(tb)
        same = same and tok_a == tok_b
    ma, mb = statistics.median(times["base"]), statistics.median(times["fast"])
    print(f"{label}")
    new = b.prompt_tokens["new"] if fast.get("reuse_kv") else a.prompt_tokens["new"]
    for name, m, be in (("baseline", ma, a), ("fast path", mb, b)):
        p = be.prompt_tokens
        print(f"  {name:<10} {m:7.2f} s   prompt tokens fed {p['fed']:6d}, reused "
              f"{p['reused']:6d}, fed per new token {p['fed'] / max(1, new):5.2f}")  # fmt: skip
    print(f"  speedup {ma / mb:.2f}x   same sampled tokens: {same}")


def concatenating_cache(config, kv=None):
    """transformers' own cache, which grows by concatenation (the baseline of ``--design``)."""
    from transformers import DynamicCache

    return DynamicCache(kv, config=config) if kv else DynamicCache(config=config)


def _alternate(args, variants: dict, label: str) -> None:
    """A designer-shaped batch generated under each variant in turn (a function that sets the
    variant up), ``--rounds`` times; prints the median times and whether the tokens agree."""
    backend = make_backend("local", model=args.model, gen_batch_size=4, threads=2)
    code = "def reset(self, seed=None):\n    self.rng = random.Random(seed)\n" * 25
    convs = [[{"role": "user", "content": f"{code}# variant {i}"}] for i in range(4)]
    params = SamplingParams(max_new_tokens=520, temperature=0.3, top_p=0.95, seed=1)
    backend.generate(convs[:1], SamplingParams(max_new_tokens=4, seed=1))  # warm up
    times: dict[str, list[float]] = {name: [] for name in variants}
    tokens: dict[str, list[list[int]]] = {}
    for _ in range(args.rounds):
        for name, setup in variants.items():
            setup()
            started = time.perf_counter()
            gens = backend.generate(convs, params)
            times[name].append(time.perf_counter() - started)
            tokens[name] = [g.completion_ids for g in gens]
    local.new_cache = new_cache  # type: ignore[assignment]
    local.sampling_options = sampling_options  # type: ignore[assignment]
    (base_name, base), (fast_name, fast) = ((k, statistics.median(v)) for k, v in times.items())
    n = sum(len(t) for t in tokens[fast_name])
    print(
        f"{label}: designer-shaped batch (4 x ~{len(gens[0].prompt_ids)} prompt tokens, {n} new tokens)"
    )
    print(f"  {base_name} {base:7.2f} s   {fast_name} {fast:7.2f} s   speedup {base / fast:.2f}x   "
          f"same sampled tokens: {tokens[base_name] == tokens[fast_name]}")  # fmt: skip


def compare_design(args) -> None:
    def cache(make):
        return lambda: setattr(local, "new_cache", make)

    _alternate(args, {"DynamicCache (concatenates)": cache(concatenating_cache),
                      "growing cache": cache(new_cache)}, "key/value cache")  # fmt: skip


def transformers_top_p(temperature: float, top_p: float, top_k: int, device: str) -> dict:
    """transformers' own warpers (the baseline of ``--top-p``)."""
    return {"temperature": temperature, "top_p": top_p, "top_k": top_k}


def compare_top_p(args) -> None:
    def options(make):
        return lambda: setattr(local, "sampling_options", make)

    _alternate(args, {"transformers' TopPLogitsWarper": options(transformers_top_p),
                      "ExactTopP": options(sampling_options)}, "top-p filtering")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--design", action="store_true")
    parser.add_argument("--top-p", action="store_true")
    args = parser.parse_args()
    if args.design:
        compare_design(args)
    if args.top_p:
        compare_top_p(args)
    compare(args, "key/value reuse across turns (threads 2)",
            {"reuse_kv": False, "threads": 2}, {"reuse_kv": True, "threads": 2})  # fmt: skip
    if args.load:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            compare(args, "one CPU-bound process beside it: threads 2 vs auto (reuse on)",
                    {"reuse_kv": True, "threads": 2}, {"reuse_kv": True, "threads": "auto"})  # fmt: skip
        finally:
            spinner.kill()
            spinner.wait()


if __name__ == "__main__":
    main()
