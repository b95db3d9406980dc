"""``spade-eval run --ckpt``: a server is started for the checkpoint, used, and stopped."""

import json
import subprocess
import sys
import time

import httpx
import pytest
from spade_eval import server

PY = sys.executable


def test_auto_picks_transformers_without_a_gpu():
    if server.gpu_present():
        pytest.skip("a GPU is present: auto picks sglang here")
    kind, cmd = server.server_command("auto", "/ckpt", 1234)
    assert kind == "transformers" and cmd[1:3] == ["-m", "spade_eval.serve"]
    kind, cmd = server.server_command("sglang", "/ckpt", 1234, tp=2) if _has_sglang() else ("", [])
    if kind:
        assert "sglang.launch_server" in cmd and cmd[cmd.index("--tp") + 1] == "2"


def _has_sglang():
    from importlib.util import find_spec

    return find_spec("sglang") is not None


@pytest.mark.slow
def test_run_ckpt_serves_evaluates_and_stops(checkpoint, workspace, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("sampling: {temperature: 0.0, max_tokens: 4}\n"
                   "suites:\n  aime: {years: [2026], limit: 2}\n")  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.run(
        [PY, "-m", "spade_eval.cli", "run", "--ckpt", checkpoint, "--server", "transformers",
         "--config", str(cfg), "--out", str(out), "--no-progress", "--startup-timeout-s", "120"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("aime: 0.0000")  # a random tiny model solves nothing
    assert (out / "server-transformers.log").is_file()
    res = json.loads((out / "results.json").read_text())
    assert res["model"] == checkpoint and res["suites"]["aime"]["n"] == 2
    assert res["metrics"]["aime2026_pass1"] == 0.0
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [
        line for line in ps.splitlines() if "spade_eval.serve" in line and checkpoint in line
    ]


@pytest.mark.slow
def test_serve_answers_chat_and_raw_completions(checkpoint, tmp_path):
    port = server.free_port()
    cmd = [PY, "-m", "spade_eval.serve", "--model", checkpoint, "--port", str(port)]
    with server.launched(cmd, port, tmp_path / "s.log", startup_timeout_s=120) as url:
        chat = httpx.post(f"{url}/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}, timeout=60)  # fmt: skip
        raw = httpx.post(f"{url}/v1/completions", json={"prompt": "<user> hello <assistant>",
                                                        "max_tokens": 3}, timeout=60)  # fmt: skip
        models = httpx.get(f"{url}/v1/models").json()
    assert chat.status_code == 200 and isinstance(
        chat.json()["choices"][0]["message"]["content"], str
    )
    assert raw.json()["choices"][0]["text"] == chat.json()["choices"][0]["message"]["content"]
    assert models["data"][0]["id"] == checkpoint
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/v1/models", timeout=2)  # stopped


@pytest.mark.slow
def test_wandb_logs_the_flat_metrics_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    import argparse

    from spade_eval.run import log_wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary = {"model": "m", "suites": {"aime": {"mean": 0.25, "n": 4}},
               "metrics": {"aime2025_pass1": 0.25}, "skipped": {"tau2": "no user simulator"}}  # fmt: skip
    log_wandb(summary, argparse.Namespace(out=str(tmp_path)))
    (store,) = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))  # the offline log
    keys = (b"eval/aime/mean", b"eval/aime/n", b"eval/aime2025_pass1", b"no user simulator")
    # wandb's service writes the offline log after run.finish() returns (1 run in 5 read only
    # its 7-byte header at once, all of it a moment later): wait for it, up to 30 s
    deadline = time.monotonic() + 30
    while not all(k in store.read_bytes() for k in keys) and time.monotonic() < deadline:
        time.sleep(0.1)
    data = store.read_bytes()
    for key in keys:
        assert key in data, key
