"""scripts/gpu_check.py on CPU, up to the device: its model builder and samples, its refusal
without a GPU, its Megatron parts run on the CPU (``--device cpu``) and the dated page it
writes from a results file (the device run itself: scripts/gpu-check.sh)."""

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
SCRIPT = ROOT / "scripts/gpu_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip


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
    # the rollout log-probs sit below the model's own by up to 0.3 (TIS weights above 1)
    from spade_train.loss import token_logprobs

    for s in samples:
        ids = torch.tensor([s.input_ids])
        with torch.no_grad():
            own = token_logprobs(local.model, ids, torch.ones_like(ids))[0][0]
        gap = own - torch.tensor(s.old_logprobs)
        assert 0 <= float(gap.min()) and float(gap.max()) <= 0.3
    assert local.train_step(samples)["grad_norm"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script runs")
def test_without_a_gpu_the_script_says_so_in_one_line(tmp_path):
    proc = _run("--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2 and not (tmp_path / "r.json").exists()
    assert proc.stderr.strip().splitlines() == [
        "error: no CUDA GPU is visible; run this on the GPU machine"
    ]
    proc = _run("--device", "cpu", "--parts", "throughput", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2 and "runs megatron_vs_local,weight_export only" in proc.stderr


@pytest.fixture(scope="module")
def cpu_results(tmp_path_factory):
    pytest.importorskip(
        "megatron.core", reason="megatron-core: pip install 'spade-train[megatron]'"
    )
    out = tmp_path_factory.mktemp("gpu-check")
    proc = _run("--device", "cpu", "--parts", "megatron_vs_local,weight_export",
                "--out", str(out / "r.json"), "--page", str(out / "page.md"), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_megatron_parts_pass_on_the_cpu(cpu_results):
    got = json.loads((cpu_results / "r.json").read_text())
    part = got["megatron_vs_local"]
    assert part["status"] == "ok" and part["logprob_max_abs_diff_vs_transformers"] < 1e-5
    assert [(c["kl_coef"], c["tis_clip"]) for c in part["combos"]] == [
        (0.0, None), (0.05, None), (0.0, 2.0), (0.05, 2.0)]  # fmt: skip
    tis = part["combos"][2]["local_vs_megatron"][0]["tis_mean"][1]
    assert tis is not None and tis > 1.0  # rollout log-probs below the policy's: weights > 1
    for combo in part["combos"]:
        for step in combo["local_vs_megatron"]:
            (a, b) = step["loss"]
            assert abs(a - b) <= 1e-4 * abs(a) + 1e-6
    assert got["weight_export"] == {**got["weight_export"], "status": "ok",
                                    "hf_to_megatron_to_hf_exact": True,
                                    "import_then_export_exact": True}  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_page_is_written_from_the_results(cpu_results, tmp_path):
    page = (cpu_results / "page.md").read_text()
    date = json.loads((cpu_results / "r.json").read_text())["date"]
    assert page.startswith(f"# {date} — The GPU check on cpu\n")  # docs/results' page format
    assert "## Megatron update against the local backend (KL, TIS): ok" in page
    assert page.count("\n| 0.05 | 2 |") == 2 and "## weight_export: ok" in page
    log = tmp_path / "pytest.log"
    log.write_text("....\n3 passed, 1 skipped in 9.1s\n")
    again = tmp_path / "again.md"
    proc = _run(
        "--from", str(cpu_results / "r.json"), "--page", str(again), "--pytest-log", str(log)
    )
    assert proc.returncode == 0 and again.read_text().startswith(page.rstrip("\n"))
    assert again.read_text().endswith("- 3 passed, 1 skipped in 9.1s\n")


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
