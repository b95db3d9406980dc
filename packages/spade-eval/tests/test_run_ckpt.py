"""``spade-eval run --ckpt``: a server is started for the checkpoint, used, and stopped."""

import json
import subprocess
import sys
import time

import httpx
import pytest
from spade_eval import server

PY = sys.executable
TRANSFORMERS_SERVE = ["-m", "transformers.cli.transformers", "serve"]


def test_auto_picks_transformers_serve_offline_without_a_gpu():
    if server.gpu_present():
        pytest.skip("a GPU is present: auto picks sglang here")
    cmd = server.server_command("auto", "/ckpt", 1234)
    assert cmd.kind == "transformers" and cmd.argv[1:5] == [*TRANSFORMERS_SERVE, "/ckpt"]
    assert cmd.argv[cmd.argv.index("--port") + 1] == "1234"
    assert cmd.env["HF_HUB_OFFLINE"] == "1" and cmd.env["HF_HUB_DISABLE_UPDATE_CHECK"] == "1"
    cmd = server.server_command("sglang", "/ckpt", 1234, tp=2) if _has_sglang() else None
    if cmd:
        assert "sglang.launch_server" in cmd.argv and cmd.argv[cmd.argv.index("--tp") + 1] == "2"


def _has_sglang():
    from importlib.util import find_spec

    return find_spec("sglang") is not None


def _servers_of(checkpoint: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if "serve" in line and checkpoint in line]


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
    assert not _servers_of(checkpoint)


@pytest.mark.slow
def test_transformers_serve_answers_the_openai_client(checkpoint, tmp_path):
    openai = pytest.importorskip("openai")
    port = server.free_port()
    cmd = server.server_command("transformers", checkpoint, port)
    with server.launched(cmd, port, tmp_path / "s.log", startup_timeout_s=180) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0, timeout=60)
        models = [m.id for m in client.models.list()]
        chat = client.chat.completions.create(
            model=checkpoint, messages=[{"role": "user", "content": "hello"}],
            max_tokens=3, temperature=0.0,
        )  # fmt: skip
        # bfcl's local-inference path: the prompt already templated, sent to /v1/completions
        raw = client.completions.create(
            model=checkpoint, prompt="<user> hello <assistant> ", max_tokens=3, temperature=0.0
        )
        with pytest.raises(openai.BadRequestError) as refused:
            client.completions.create(model="another-model", prompt="hello", max_tokens=1)
    assert models == [checkpoint]
    assert "pinned to" in refused.value.response.text  # a server for one checkpoint only
    text = chat.choices[0].message.content
    assert isinstance(text, str) and chat.usage is not None and chat.usage.completion_tokens > 0
    assert raw.choices[0].text == text  # same tokens, greedy: the same continuation
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/v1/models", timeout=2)  # stopped
    assert not _servers_of(checkpoint)  # nothing of the process group is left


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
