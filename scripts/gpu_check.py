"""The device check of the GPU path (run by scripts/gpu-check.sh on a CUDA machine).

Each part runs on its own and records ``{"status": "ok" | "failed" | "skipped", ...}`` in one
JSON file, so a part that fails (or whose package is missing) leaves the others' results:

1. ``megatron_vs_local``: the Megatron backend's update against the local backend's on one
   batch from the same tiny Qwen3 weights (float32, TF32 off): log-probs against
   transformers, then loss, grad norm and the KL / TIS metrics over two steps with
   ``kl_coef`` and ``tis_clip`` each off and on.
2. ``weight_export``: HF -> Megatron -> HF through the bucketed export, exact, both ways.
3. ``throughput``: the update's tokens/s on a Qwen3-0.6B-shaped model (random weights, built
   from a config: nothing is downloaded), local (bfloat16) against Megatron (bfloat16, and
   float32 as the first GPU run had it, and bfloat16 with recomputation), micro-batches of 4;
   the time of the bucketed export and of a HF import at that size.
4. ``loop``: two cycles of ``spade train`` on the GPU (local backend, tiny Qwen3).
5. ``sglang``: SGLang engine generation against the local backend's log-probs, a disk weight
   update, and Megatron's exported buckets pushed with ``update_weights_from_tensor``
   (skipped, with the reason, where sglang is not installed).

Usage: python scripts/gpu_check.py --out results.json [--parts a,b] [--device cuda]
       [--page docs/results/DATE-gpu-check.md] [--pytest-log LOG ...]
``--device cpu`` runs parts 1 and 2 on the CPU (how the tests check this script).
"""

from __future__ import annotations

import argparse
import datetime
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

TOL = {"logprob_abs": 1e-4, "loss_rel": 1e-4, "grad_norm_rel": 1e-4}
DEVICE = "cuda"


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
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>")
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
    )
    cfg = Qwen3Config(vocab_size=vocab, max_position_embeddings=4096, eos_token_id=1,
                      pad_token_id=2, tie_word_embeddings=False, **sizes)  # fmt: skip
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _samples(local: Any, rows: list[list[int]], advantages: list[float]) -> list[Any]:
    """Samples whose rollout log-probs are the local model's own minus noise (TIS weights
    differ from 1, as for an engine that samples slightly differently)."""
    from spade_train.loss import token_logprobs
    from spade_train.types import TrainSample

    g = torch.Generator().manual_seed(7)
    out = []
    for row, adv in zip(rows, advantages, strict=True):
        ids = torch.tensor([row], device=local.device)
        with torch.no_grad():
            lp, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
        noisy = (lp[0].cpu() - 0.3 * torch.rand(len(row), generator=g)).tolist()
        cut = len(row) // 3
        out.append(TrainSample(row, [0] * cut + [1] * (len(row) - cut), noisy, adv, "agent"))
    return out


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * abs(a) + 1e-6


def megatron_vs_local(work: Path) -> dict[str, Any]:
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.loss import token_logprobs

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = tiny_dir(work / "tiny")
    g = torch.Generator().manual_seed(1)
    rows = [torch.randint(3, 96, (n,), generator=g).tolist() for n in (24, 17, 31, 12)]
    advantages = [1.0, -1.0, 0.5, 0.25]
    out: dict[str, Any] = {"tolerances": TOL, "combos": []}
    ok = True
    for kl, tis in ((0.0, None), (0.05, None), (0.0, 2.0), (0.05, 2.0)):
        opts = dict(lr=1e-2, kl_coef=kl, tis_clip=tis, micro_batch_size=2, seed=0)
        local = make_backend("local", model=str(model), device=DEVICE, dtype="float32", **opts)
        mega = MegatronBackend(model=str(model), device=DEVICE, dtype="float32", **opts)
        try:
            if not out["combos"]:
                gap = 0.0
                for row, got in zip(rows, mega.logprobs(rows), strict=True):
                    ids = torch.tensor([row], device=DEVICE)
                    with torch.no_grad():
                        want, _ = token_logprobs(local.model, ids, torch.ones_like(ids))
                    gap = max(gap, (torch.tensor(got) - want[0].cpu()).abs().max().item())
                out["logprob_max_abs_diff_vs_transformers"] = gap
                ok &= gap < TOL["logprob_abs"]
            samples = _samples(local, rows, advantages)
            steps = []
            for _ in range(2):
                a, b = local.train_step(samples), mega.train_step(samples)
                keys = ("loss", "grad_norm", "tokens", "clip_frac", "entropy", "tis_mean")
                steps.append({k: [a.get(k), b.get(k)] for k in keys})
                ok &= _close(a["loss"], b["loss"], TOL["loss_rel"])
                ok &= _close(a["grad_norm"], b["grad_norm"], TOL["grad_norm_rel"])
            out["combos"].append({"kl_coef": kl, "tis_clip": tis, "local_vs_megatron": steps})
        finally:
            mega.close()
            local.close()
    return {"status": "ok" if ok else "failed", **out}


def weight_export(work: Path) -> dict[str, Any]:
    from safetensors.torch import load_file, save_file
    from spade_train.backends.megatron import MegatronBackend

    model = tiny_dir(work / "tiny")
    want = load_file(str(model / "model.safetensors"))
    mega = MegatronBackend(model=str(model), device=DEVICE, dtype="float32")
    try:
        buckets = list(mega.export_hf_buckets(8192))
        got = {k: v.cpu() for b in buckets for k, v in b}
        out_exact = sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)
        changed = {k: v + 0.25 for k, v in want.items()}
        (work / "changed").mkdir()
        save_file(changed, str(work / "changed/model.safetensors"), metadata={"format": "pt"})
        mega.load_hf(work / "changed")
        back = {k: v.cpu() for b in mega.export_hf_buckets(8192) for k, v in b}
        in_exact = all(torch.equal(back[k], changed[k]) for k in changed)
    finally:
        mega.close()
    return {"status": "ok" if out_exact and in_exact else "failed", "buckets": len(buckets),
            "hf_to_megatron_to_hf_exact": out_exact, "import_then_export_exact": in_exact}  # fmt: skip


def _timed_steps(step: Callable[[list], dict[str, float]], samples: list) -> dict[str, float]:
    step(samples)  # warm-up (allocations, kernels)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(3):
        step(samples)
    torch.cuda.synchronize()
    took = (time.perf_counter() - start) / 3
    tokens = sum(len(s.input_ids) for s in samples)
    return {"samples": len(samples), "tokens": tokens, "step_s": took, "tokens_per_s": tokens / took,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30}  # fmt: skip


def _free() -> None:
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def throughput(work: Path) -> dict[str, Any]:
    """Qwen3-0.6B's shape (28 layers, hidden 1024, 16/8 heads) with a 151,936 vocabulary."""
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.types import TrainSample

    shape = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128)  # fmt: skip
    model = tiny_dir(work / "q06", vocab=151936, **shape)
    out: dict[str, Any] = {"status": "ok", "model": "Qwen3-0.6B shape, random weights",
                           "batch": "16 rows x 512 tokens (384 trained), micro-batches of 4"}  # fmt: skip
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, 151936, (512,), generator=g).tolist() for _ in range(16)]
    samples = [TrainSample(r, [0] * 128 + [1] * 384, [-12.0] * 512, 1.0 - 2 * (i % 2), "agent")
               for i, r in enumerate(rows)]  # fmt: skip
    _free()
    local = make_backend("local", model=str(model), device="cuda", dtype="bfloat16", lr=1e-6,
                         micro_batch_size=4, seed=0)  # fmt: skip
    out["local_bf16"] = _timed_steps(local.train_step, samples)
    local.close()
    del local
    for name, opts in (("megatron_bf16", {"dtype": "bfloat16"}),
                       ("megatron_fp32", {"dtype": "float32"}),
                       ("megatron_bf16_recompute", {"dtype": "bfloat16",
                                                    "gradient_checkpointing": True})):  # fmt: skip
        _free()
        try:  # the numbers above stay in the results if one Megatron run fails
            mega = MegatronBackend(model=str(model), device="cuda", lr=1e-6, micro_batch_size=4,
                                   **opts)  # fmt: skip
            try:
                out[name] = _timed_steps(mega.train_step, samples)
                if name == "megatron_bf16":
                    out["export_import"] = _export_import(mega, model)
            finally:
                mega.close()
                del mega
        except Exception as exc:
            out.update(status="failed")
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    base = out["local_bf16"]["tokens_per_s"]
    out["ratio_to_local"] = {k: out[k]["tokens_per_s"] / base for k in out
                             if k.startswith("megatron") and "tokens_per_s" in out[k]}  # fmt: skip
    return out


def _export_import(mega: Any, model: Path) -> dict[str, float]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    nbytes = 0
    for bucket in mega.export_hf_buckets(512 * 2**20):
        nbytes += sum(t.numel() * t.element_size() for _, t in bucket)
    torch.cuda.synchronize()
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    mega.load_hf(model)
    torch.cuda.synchronize()
    return {"export_gib": nbytes / 2**30, "export_s": export_s,
            "export_gib_per_s": nbytes / 2**30 / export_s,
            "import_from_disk_s": time.perf_counter() - start}  # fmt: skip


def loop(work: Path) -> dict[str, Any]:
    run = work / "run"
    argv = [sys.executable, "-c", "import sys; from spade_train.cli import main; "
            "sys.exit(main(sys.argv[1:]))", "train", "--recipe", "quickstart", "--run-dir",
            str(run), "backend.model=tiny:qwen3", "backend.device=cuda", "backend.dtype=auto"]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    rows = []
    if (run / "metrics.jsonl").exists():
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    keys = ("cycle", "design/valid", "play/parsed_rate", "play/errors", "train/loss")
    return {"status": "ok" if proc.returncode == 0 and len(rows) >= 2 else "failed",
            "rc": proc.returncode, "seconds": time.perf_counter() - start,
            "stderr_tail": proc.stderr[-1500:],
            "cycles": [{k: r.get(k) for k in keys} for r in rows]}  # fmt: skip


def sglang_parts(work: Path) -> dict[str, dict[str, Any]]:
    import importlib.util

    names = ("sglang_generation", "sglang_weight_update", "sglang_megatron_buckets")
    if importlib.util.find_spec("sglang") is None:
        return dict.fromkeys(names, {"status": "skipped", "why": "sglang is not installed here"})
    from spade_train.backends import make_backend
    from spade_train.backends.megatron import MegatronBackend
    from spade_train.backends.sglang import generate_chat, launch_engine
    from spade_train.types import SamplingParams

    model = tiny_dir(work / "sg", hidden_size=64, intermediate_size=128, head_dim=16)
    local = make_backend("local", model=str(model), device="cuda", dtype="float32", seed=0)
    engine = launch_engine(str(model), mem_fraction_static=0.3, log_level="error")
    out: dict[str, dict[str, Any]] = {}
    try:
        convs = [[{"role": "user", "content": f"t{5 + i} t{9 + i}"}] for i in range(8)]
        params = SamplingParams(max_new_tokens=32, temperature=1.0, seed=0)
        start = time.perf_counter()
        gens = generate_chat(engine, local.tokenizer, convs, params)
        took = time.perf_counter() - start
        rows = [g.prompt_ids + g.completion_ids for g in gens]
        gap = _sglang_gap(gens, [_local_lp(local, r) for r in rows])
        out[names[0]] = {"status": "ok" if gap < 1e-2 else "failed", "logprob_max_abs_diff": gap,
                         "tokens_per_s": sum(len(g.completion_ids) for g in gens) / took}  # fmt: skip
        with torch.no_grad():
            for p in local.model.parameters():
                p.add_(torch.randn_like(p))
        local.model.save_pretrained(work / "sg2")
        engine.update_weights_from_disk(str(work / "sg2"))
        after = generate_chat(engine, local.tokenizer, convs, params)
        moved = [g.logprobs for g in after] != [g.logprobs for g in gens]
        out[names[1]] = {"status": "ok" if moved else "failed"}
        local.close()
        mega = MegatronBackend(model=str(model), device="cuda", dtype="float32", lr=1e-2)
        try:
            start = time.perf_counter()
            for bucket in mega.export_hf_buckets(1 << 20):
                engine.update_weights_from_tensor(bucket)
            push_s = time.perf_counter() - start
            pushed = generate_chat(engine, local.tokenizer, convs, params)
            want = mega.logprobs([g.prompt_ids + g.completion_ids for g in pushed])
            gap = _sglang_gap(pushed, want)
            out[names[2]] = {"status": "ok" if gap < 1e-2 else "failed", "push_s": push_s,
                             "logprob_max_abs_diff_vs_megatron": gap}  # fmt: skip
        finally:
            mega.close()
    finally:
        engine.close()
    return out


def _local_lp(local: Any, row: list[int]) -> list[float]:
    from spade_train.loss import token_logprobs

    ids = torch.tensor([row], device="cuda")
    with torch.no_grad():
        return token_logprobs(local.model, ids, torch.ones_like(ids))[0][0].tolist()


def _sglang_gap(gens: list[Any], full: list[list[float]]) -> float:
    gap = 0.0
    for g, lp in zip(gens, full, strict=True):
        mine = lp[len(g.prompt_ids) :]
        gap = max([gap, *(abs(x - y) for x, y in zip(mine, g.logprobs, strict=True))])
    return gap


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return "-" if x is None else str(x)


def _megatron_rows(part: dict[str, Any]) -> list[str]:
    rows = [f"Log-probs against transformers: max |diff| "
            f"{_fmt(part.get('logprob_max_abs_diff_vs_transformers'))} "
            f"(tolerances {part.get('tolerances')}).", "",
            "| kl_coef | tis_clip | step | loss local / megatron | grad norm local / megatron "
            "| tis_mean local / megatron |", "|---|---|---|---|---|---|"]  # fmt: skip
    for combo in part.get("combos", []):
        for i, step in enumerate(combo["local_vs_megatron"], 1):
            cells = [
                " / ".join(_fmt(v) for v in step[k]) for k in ("loss", "grad_norm", "tis_mean")
            ]
            rows.append(f"| {combo['kl_coef']} | {_fmt(combo['tis_clip'])} | {i} | "
                        + " | ".join(cells) + " |")  # fmt: skip
    return rows


def _throughput_rows(part: dict[str, Any]) -> list[str]:
    rows = [f"{part.get('model')}; {part.get('batch')}.", "",
            "| update | tokens/s | step (s) | peak GPU memory (GiB) | x local |", "|---|---|---|---|---|"]  # fmt: skip
    ratios = part.get("ratio_to_local", {})
    for key in ("local_bf16", "megatron_bf16", "megatron_fp32", "megatron_bf16_recompute"):
        r = part.get(key)
        if isinstance(r, dict) and "tokens_per_s" in r:
            rows.append(f"| {key} | {r['tokens_per_s']:.0f} | {r['step_s']:.3f} | "
                        f"{r['peak_gib']:.1f} | {ratios.get(key, 1.0):.2f} |")  # fmt: skip
        elif isinstance(r, dict):
            rows.append(f"| {key} | failed: {r.get('error')} | | | |")
    if "export_import" in part:
        e = part["export_import"]
        rows += ["", f"Bucketed export (512 MiB buckets): {e['export_gib']:.2f} GiB in "
                 f"{e['export_s']:.2f} s ({e['export_gib_per_s']:.1f} GiB/s); HF import from disk "
                 f"{e['import_from_disk_s']:.2f} s."]  # fmt: skip
    return rows


def render_page(results: dict[str, Any], pytest_logs: list[str]) -> str:
    """The results as the dated markdown page of docs/results."""
    env = results.get("environment", {})
    versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in env.items()
                         if k not in ("gpu", "cuda"))  # fmt: skip
    device = env.get("gpu") or results.get("device")
    out = [f"# {results.get('date')} — The GPU check on {device}", "",
           f"Device: {device} (CUDA {env.get('cuda')}); {versions}.",
           "Command: `bash scripts/gpu-check.sh` ([running at scale](../scale.md#the-gpu-check-"
           "scriptsgpu-checksh)); its `gpu-check.json` is the source of every number here.", ""]  # fmt: skip
    sections = (("megatron_vs_local", "Megatron update against the local backend (KL, TIS)",
                 _megatron_rows), ("throughput", "Update throughput", _throughput_rows))  # fmt: skip
    for key, title, rows in sections:
        part = results.get(key)
        if isinstance(part, dict):
            out += [f"## {title}: {part.get('status')}", "", *rows(part), ""]
    for key in ("weight_export", "loop", "sglang_generation", "sglang_weight_update",
                "sglang_megatron_buckets"):  # fmt: skip
        part = results.get(key)
        if isinstance(part, dict):
            facts = {k: v for k, v in part.items() if k not in ("status", "traceback", "cycles")}
            out += [
                f"## {key}: {part.get('status')}",
                "",
                f"`{json.dumps(facts, default=str)}`",
                "",
            ]
    if pytest_logs:
        out += ["## Tests on the device", ""]
        out += [f"- {log.strip().splitlines()[-1]}" for log in pytest_logs if log.strip()]
    return "\n".join(out).rstrip() + "\n"


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    def version(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    names = ("torch", "transformers", "megatron-core", "transformer-engine", "sglang", "ray")
    info: dict[str, Any] = {n: version(n) for n in names}
    info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    info["cuda"] = torch.version.cuda
    return info


PARTS: dict[str, Callable[[Path], Any]] = {
    "megatron_vs_local": megatron_vs_local, "weight_export": weight_export,
    "throughput": throughput, "loop": loop, "sglang": sglang_parts}  # fmt: skip


def _write_page(results: dict[str, Any], page: Path | None, logs: list[Path]) -> int:
    if page is None:
        print("error: --from needs --page", file=sys.stderr)
        return 2
    texts = [p.read_text(errors="replace") for p in logs if p.exists()]
    page.parent.mkdir(parents=True, exist_ok=True)
    tmp = page.with_name(page.name + ".tmp")
    tmp.write_text(render_page(results, texts))
    tmp.replace(page)
    return 0


def main() -> int:
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the results file (JSON)")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--page", type=Path, help="also write the results as a markdown page")
    parser.add_argument("--pytest-log", type=Path, action="append", default=[])
    parser.add_argument("--from", dest="source", type=Path,
                        help="write --page from this results file; run nothing")  # fmt: skip
    args = parser.parse_args()
    if args.source:
        return _write_page(json.loads(args.source.read_text()), args.page, args.pytest_log)
    DEVICE = args.device
    parts = args.parts.split(",")
    if args.out is None or set(parts) - set(PARTS):
        print(f"error: give --out FILE and --parts from {','.join(PARTS)}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU is visible; run this on the GPU machine", file=sys.stderr)
        return 2
    if args.device == "cpu" and set(parts) - {"megatron_vs_local", "weight_export"}:
        print("error: --device cpu runs megatron_vs_local,weight_export only", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"date": datetime.date.today().isoformat(), "device": args.device,
                               "environment": environment()}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in parts:
            start = time.perf_counter()
            try:
                got = PARTS[name](Path(tmp) / name)
            except Exception as exc:  # a part's failure is its result, the others still run
                got = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-3000:]}  # fmt: skip
            if name != "sglang":
                got = {name: {**got, "seconds": round(time.perf_counter() - start, 1)}}
            results.update(got)
            print(f"== {name} ({time.perf_counter() - start:.1f} s)", flush=True)
            args.out.write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results, indent=1, default=str))
    if args.page:
        _write_page(results, args.page, args.pytest_log)
    return 0 if all(v.get("status") != "failed" for v in results.values()
                    if isinstance(v, dict) and "status" in v) else 1  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
