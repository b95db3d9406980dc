"""Local-backend decoding under MKL's default path and its reproducible path (MKL_CBWR=AUTO).

    uv run --package spade-train python packages/spade-train/benchmarks/bench_blas.py [--rounds 2]

MKL picks its path once per process, at the first matrix product, so each measurement runs in
a fresh child process: ``default`` makes a product before the backend exists (MKL starts in
its default mode), ``cnr`` lets the backend ask for the reproducible path
(``backends/blas.py``; a no-op off AMD CPUs, where both children then run the same path).
Children alternate, ``--rounds`` of each. Each child times:

- a designer-shaped batch (4 prompts of ~600 tokens, 520 new tokens each, temperature 0.3,
  as the quickstart's design call), and whether its tokens match the other path's;
- batch-1 decoding (one prompt, 128 new tokens), as a share of the memory roof: the float32
  weights' bytes over the read bandwidth measured in the same child (numpy summing 512 MB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time
import numpy as np, torch
if sys.argv[1] == "default":
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))
from spade_train.backends import make_backend
from spade_train.types import SamplingParams
model = sys.argv[2]
backend = make_backend("local", model=model, gen_batch_size=4, threads=2)
code = "def reset(self, seed=None):\\n    self.rng = random.Random(seed)\\n" * 25
convs = [[{"role": "user", "content": f"{code}# variant {i}"}] for i in range(4)]
backend.generate(convs[:1], SamplingParams(max_new_tokens=4, seed=1))
started = time.perf_counter()
gens = backend.generate(convs, SamplingParams(max_new_tokens=520, temperature=0.3, top_p=0.95, seed=1))
design_s = time.perf_counter() - started
one = [[{"role": "user", "content": "Write a short story about a robot."}]]
params = SamplingParams(max_new_tokens=128, temperature=0.8, seed=1)
started = time.perf_counter()
single = backend.generate(one, params)[0]
token_ms = (time.perf_counter() - started) / max(1, len(single.completion_ids)) * 1e3
data = np.ones(128 * 1024 * 1024, dtype=np.float32)
read_s = min((lambda t: (data.sum(), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(3))
weights = sum(p.numel() * p.element_size() for p in backend.model.parameters())
print(json.dumps({"design_s": design_s, "tokens": [g.completion_ids for g in gens],
                  "new": sum(len(g.completion_ids) for g in gens), "token_ms": token_ms,
                  "roof_ms": weights / (data.nbytes / read_s) * 1e3}))
"""


def child(variant: str, model: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, variant, model], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"default": [], "cnr": []}
    for _ in range(args.rounds):
        for variant, results in runs.items():
            results.append(child(variant, args.model))
    print(f"{args.model}: MKL default path against MKL_CBWR=AUTO, {args.rounds} rounds, medians")
    for variant, results in runs.items():
        design = statistics.median(r["design_s"] for r in results)
        token = statistics.median(r["token_ms"] for r in results)
        roof = statistics.median(r["roof_ms"] for r in results)
        print(f"  {variant:<8} design batch {design:7.2f} s ({results[0]['new']} new tokens)   "
              f"batch 1 {token:5.1f} ms/token = {roof / token:4.0%} of the memory roof "
              f"({roof:.1f} ms)")  # fmt: skip
    base = statistics.median(r["design_s"] for r in runs["default"])
    fast = statistics.median(r["design_s"] for r in runs["cnr"])
    same = all(r["tokens"] == runs["default"][0]["tokens"] for rs in runs.values() for r in rs)
    print(f"  design batch speedup {base / fast:.2f}x   same sampled tokens: {same}")
    print("  goal (issue 23): batch 1 >= 80% of the memory roof")


if __name__ == "__main__":
    main()
