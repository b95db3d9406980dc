"""scripts/gpu_check.py on CPU, up to the device: its model builder, its loss comparison's
inputs, and its refusal without a GPU (the device run itself: the spade-train README)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from spade_train.backends import make_backend
from spade_train.types import SamplingParams

ROOT = Path(__file__).resolve().parents[3]


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts/gpu_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_tiny_model_chats_generates_and_trains_on_the_local_backend(tmp_path):
    check = _script()
    model = check.tiny_dir(tmp_path / "m", vocab=200, hidden_size=64, intermediate_size=96,
                           head_dim=16)  # fmt: skip
    local = make_backend("local", model=str(model), device="cpu", dtype="float32", lr=1e-2)
    chat = [{"role": "user", "content": "t5 t9"}]
    gen = local.generate([chat], SamplingParams(max_new_tokens=5, seed=0))[0]
    prompt = local.tokenizer.convert_ids_to_tokens(gen.prompt_ids)
    assert prompt == ["<|im_start|>", "t0", "t5", "t9", "<|im_end|>", "<|im_start|>", "t0"]
    assert 0 < len(gen.completion_ids) <= 5
    rows = [[3, 7, 11, 19, 23, 40], [5, 6, 7, 8]]
    samples = check._samples(local, rows, [1.0, -1.0])
    assert [s.loss_mask for s in samples] == [[0, 0, 1, 1, 1, 1], [0, 1, 1, 1]]
    # on-policy: the old log-probs are the model's own, so the first step's ratio is 1
    first = local.train_step(samples)
    assert first["clip_frac"] == 0.0 and first["grad_norm"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script runs")
def test_without_a_gpu_the_script_says_so_in_one_line(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gpu_check.py"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().splitlines() == [
        "error: no CUDA GPU is visible; run this on the GPU machine"
    ]


def test_the_recorded_h200_results_met_their_tolerances():
    path = ROOT / "packages/spade-train/benchmarks/results/gpu-check-h200-2026-12-04.json"
    got = json.loads(path.read_text())
    part = got["megatron_vs_local"]
    assert (
        part["status"] == "ok" and part["logprob_max_abs_diff"] < part["tolerances"]["logprob_abs"]
    )
    for step in part["steps_local_vs_megatron"]:
        (a, b) = step["loss"]
        assert abs(a - b) <= part["tolerances"]["loss_rel"] * abs(a) + 1e-6
