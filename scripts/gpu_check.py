"""The device check of the GPU path (run by scripts/gpu-check.sh on a CUDA machine).

Each part runs on its own and records ``{"status": "ok" | "failed" | "skipped", ...}`` in one
JSON file, so a part that fails (or whose package is missing) leaves the others' results:

1. ``sglang_generation``: SGLang engine generation with log-probs against the local backend's
   recomputation of the same tokens.
2. ``sglang_weight_update``: weights published to SGLang change its next generations.
3. ``megatron_vs_local``: a Megatron-core step and the local backend's step on one batch from
   the same tiny Qwen3 weights (fp32, TF32 off): log-probs, loss and grad norm, two steps.
4. ``loop``: two cycles of ``spade train`` on the GPU (local backend, tiny Qwen3).
5. ``throughput``: tokens/s of generation and of the update on a Qwen3-0.6B-shaped model
   (random weights, config-built: nothing is downloaded).

Usage: python scripts/gpu_check.py --out results.json [--parts megatron_vs_local,throughput]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

TOL = {"logprob_abs": 1e-4, "loss_rel": 1e-3, "grad_norm_rel": 1e-3}


def tiny_dir(path: Path, vocab: int = 96, **shape: int) -> Path:
    """A config-built Qwen3 with a word-level tokenizer and a ChatML template, saved at path."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    sizes = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=8)  # fmt: skip
    sizes.update(shape)
    special = ["<|im_start|>", "<|im_end|>", "<pad>"]
    words = special + [f"t{i}" for i in range(vocab - 3)]
    core = Tokenizer(models.WordLevel(dict(zip(words, range(vocab), strict=True)), "t0"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens(special)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<pad>",
    )
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
    )
    cfg = Qwen3Config(vocab_size=vocab, max_position_embeddings=4096, eos_token_id=1,
                      pad_token_id=2, **sizes)  # fmt: skip
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _samples(local: Any, rows: list[list[int]], advantages: list[float]) -> list[Any]:
    """On-policy samples: the old log-probs are the local model's own."""
    from spade_train.loss import token_logprobs
    from spade_train.types import TrainSample

    out = []
    for row, adv in zip(rows, advantages, strict=True):
        ids = torch.tensor([row], device=local.device)
        with torch.no_grad():
            lp, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
        cut = len(row) // 3
        out.append(TrainSample(row, [0] * cut + [1] * (len(row) - cut), lp[0].tolist(), adv,
                               "agent"))  # fmt: skip
    return out


def _gap(mega: Any, local: Any, rows: list[list[int]]) -> float:
    from spade_train.loss import token_logprobs

    worst = 0.0
    for row in rows:
        ids = torch.tensor([row], device="cuda")
        pos = torch.arange(len(row), device="cuda")[None]
        with torch.no_grad():
            lp, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
            logits = mega.model(ids, pos, attention_mask=None).float()
        m_lp = torch.log_softmax(logits[0, :-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
        worst = max(worst, (m_lp - lp[0, 1:]).abs().max().item())
    return worst


def megatron_vs_local(work: Path) -> dict[str, Any]:
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = tiny_dir(work / "tiny")
    local = make_backend("local", model=str(model), device="cuda", dtype="float32", lr=1e-2,
                         micro_batch_size=8, seed=0)  # fmt: skip
    mega = MegatronBackend(model=str(model), lr=1e-2)
    try:
        g = torch.Generator().manual_seed(1)
        rows = [torch.randint(3, 96, (n,), generator=g).tolist() for n in (24, 17, 31)]
        gap = _gap(mega, local, rows)
        samples = _samples(local, rows, [1.0, -1.0, 0.5])
        steps = []
        for _ in range(2):
            a, b = local.train_step(samples), mega.train_step(samples)
            steps.append({k: [a[k], b[k]] for k in ("loss", "grad_norm", "tokens")})
    finally:
        mega.close()
        local.close()
    ok = gap < TOL["logprob_abs"] and all(
        abs(s["loss"][1] - s["loss"][0]) <= TOL["loss_rel"] * abs(s["loss"][0]) + 1e-6
        and abs(s["grad_norm"][1] - s["grad_norm"][0]) <= TOL["grad_norm_rel"] * s["grad_norm"][0]
        for s in steps
    )
    return {"status": "ok" if ok else "failed", "logprob_max_abs_diff": gap,
            "steps_local_vs_megatron": steps, "tolerances": TOL}  # fmt: skip


def _sglang_engine(model: Path) -> Any:
    from spade_train.backends.sglang import launch_engine

    return launch_engine(str(model), mem_fraction_static=0.3, log_level="error")


def sglang_parts(work: Path) -> dict[str, dict[str, Any]]:
    """Parts 1 and 2 (one engine for both)."""
    import importlib.util

    if importlib.util.find_spec("sglang") is None:
        why = {"status": "skipped", "why": "sglang is not installed on this machine"}
        return {"sglang_generation": why, "sglang_weight_update": why}
    from spade_train.backends import make_backend
    from spade_train.backends.sglang import generate_chat
    from spade_train.loss import token_logprobs
    from spade_train.types import SamplingParams

    model = tiny_dir(work / "sg", hidden_size=64, intermediate_size=128, head_dim=16)
    local = make_backend("local", model=str(model), device="cuda", dtype="float32", seed=0)
    engine = _sglang_engine(model)
    try:
        convs = [[{"role": "user", "content": f"t{5 + i} t{9 + i}"}] for i in range(8)]
        params = SamplingParams(max_new_tokens=32, temperature=1.0, seed=0)
        start = time.perf_counter()
        gens = generate_chat(engine, local.tokenizer, convs, params)
        took = time.perf_counter() - start
        gap = 0.0
        for gen in gens:
            ids = torch.tensor([gen.prompt_ids + gen.completion_ids], device="cuda")
            with torch.no_grad():
                lp, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
            mine = lp[0, len(gen.prompt_ids) :].tolist()
            gap = max([gap, *(abs(x - y) for x, y in zip(mine, gen.logprobs, strict=True))])
        first = {"status": "ok" if gap < 1e-2 else "failed", "logprob_max_abs_diff": gap,
                 "tokens_per_s": sum(len(x.completion_ids) for x in gens) / took}  # fmt: skip
        with torch.no_grad():
            for p in local.model.parameters():
                p.add_(torch.randn_like(p))
        local.model.save_pretrained(work / "sg2")
        start = time.perf_counter()
        engine.update_weights_from_disk(str(work / "sg2"))
        update_s = time.perf_counter() - start
        after = generate_chat(engine, local.tokenizer, convs, params)
        moved = [g.logprobs for g in after] != [g.logprobs for g in gens]
        second = {"status": "ok" if moved else "failed", "update_s": update_s}
    finally:
        engine.close()
        local.close()
    return {"sglang_generation": first, "sglang_weight_update": second}


def loop(work: Path) -> dict[str, Any]:
    run = work / "run"
    argv = [sys.executable, "-c", "import sys; from spade_train.cli import main; "
            "sys.exit(main(sys.argv[1:]))", "train", "--recipe", "quickstart", "--run-dir",
            str(run), "backend.model=tiny:qwen3", "backend.device=cuda", "backend.dtype=auto"]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    rows = []
    metrics = run / "metrics.jsonl"
    if metrics.exists():
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    keys = ("cycle", "design/valid", "play/parsed_rate", "play/errors", "train/loss")
    return {"status": "ok" if proc.returncode == 0 and len(rows) >= 2 else "failed",
            "rc": proc.returncode, "seconds": took, "stderr_tail": proc.stderr[-1500:],
            "cycles": [{k: r.get(k) for k in keys} for r in rows]}  # fmt: skip


def throughput(work: Path) -> dict[str, Any]:
    """Qwen3-0.6B's shape (28 layers, hidden 1024, 16/8 heads) with a 151,936 vocabulary."""
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.types import SamplingParams, TrainSample

    shape = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128)  # fmt: skip
    model = tiny_dir(work / "q06", vocab=151936, **shape)
    out: dict[str, Any] = {"status": "ok", "model": "Qwen3-0.6B shape, random weights"}
    local = make_backend("local", model=str(model), device="cuda", lr=1e-6, micro_batch_size=16,
                         gen_batch_size=64, seed=0)  # fmt: skip
    convs = [[{"role": "user", "content": " ".join(f"t{i + j}" for j in range(64))}]
             for i in range(64)]  # fmt: skip
    params = SamplingParams(max_new_tokens=256, temperature=1.0, seed=0)
    local.generate(convs[:2], SamplingParams(max_new_tokens=8, seed=0))  # warm-up
    torch.cuda.synchronize()
    start = time.perf_counter()
    gens = local.generate(convs, params)
    took = time.perf_counter() - start
    n = sum(len(g.completion_ids) for g in gens)
    out["local_generate"] = {"batch": 64, "tokens": n, "s": took, "tokens_per_s": n / took}
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, 151936, (512,), generator=g).tolist() for _ in range(16)]
    samples = [TrainSample(r, [0] * 128 + [1] * 384, [-12.0] * 512, 1.0 - 2 * (i % 2), "agent")
               for i, r in enumerate(rows)]  # fmt: skip
    out["local_update_bf16"] = _timed_steps(local.train_step, samples)
    local.close()
    del local
    torch.cuda.empty_cache()
    try:  # the local numbers above stay in the results if Megatron fails
        mega = MegatronBackend(model=str(model), lr=1e-6)
        try:
            out["megatron_update_fp32"] = _timed_steps(mega.train_step, samples)
        finally:
            mega.close()
    except Exception as exc:
        out.update(status="failed", error=f"megatron: {type(exc).__name__}: {exc}")
    out["gpu_memory_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def _timed_steps(step: Callable[[list], dict[str, float]], samples: list) -> dict[str, float]:
    step(samples)  # warm-up (allocations, kernels)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(3):
        step(samples)
    torch.cuda.synchronize()
    took = (time.perf_counter() - start) / 3
    tokens = sum(len(s.input_ids) for s in samples)
    return {
        "samples": len(samples),
        "tokens": tokens,
        "step_s": took,
        "tokens_per_s": tokens / took,
    }


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    def version(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    names = ("torch", "transformers", "megatron-core", "sglang", "ray")
    info: dict[str, Any] = {n: version(n) for n in names}
    info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    info["cuda"] = torch.version.cuda
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--parts", default="sglang,megatron_vs_local,loop,throughput")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible; run this on the GPU machine", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"environment": environment()}
    parts: dict[str, Callable[[Path], Any]] = {"sglang": sglang_parts,
        "megatron_vs_local": megatron_vs_local, "loop": loop, "throughput": throughput}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.parts.split(","):
            start = time.perf_counter()
            try:
                got = parts[name](Path(tmp) / name)
            except Exception as exc:  # a part's failure is its result, the others still run
                got = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-3000:]}  # fmt: skip
            results.update(got if name == "sglang" else {name: got})
            print(f"== {name} ({time.perf_counter() - start:.1f} s)", flush=True)
            args.out.write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results, indent=1, default=str))
    return 0 if all(v.get("status") != "failed" for v in results.values() if "status" in v) else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
