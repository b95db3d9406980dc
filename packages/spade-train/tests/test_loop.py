"""The self-play loop end to end on a tiny Qwen3 policy: every stage, every mode, exact resume.

The designer of a tiny random model never writes a valid environment, so one test forces the
designer's reply (teacher forcing: the reply's tokens and their real log-probs under the
policy) to a known-good game; everything else — validation in the sandbox, hinted and unhinted
play, regret, advantages, the optimizer step — runs for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import spade_envs as se
import torch
from spade_train.backends.local import LocalBackend
from spade_train.config import load_recipe
from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP
from spade_train.loop import resume_run, start_run
from spade_train.loss import token_logprobs
from spade_train.types import Generation

SMALL = [
    "backend.model=tiny:qwen3",
    "backend.micro_batch_size=8",
    # the whole designer prompt fits (a truncated prompt is counted where generation runs: by
    # the local backend itself, by the rollout workers under ray)
    "backend.max_seq_len=2048",
    "designer.prompts_per_cycle=1",
    "designer.group_size=2",
    "designer.sampling.max_new_tokens=24",
    "designer.grounding.enabled=true",
    "designer.grounding.k=1",
    "validation.seeds=1",
    "agent.envs_per_cycle=2",
    "agent.episodes_per_env=1",
    "agent.hint_plays_per_env=1",
    "agent.max_turns=2",
    "agent.sampling.max_new_tokens=8",
    "logging.progress=false",
    "logging.transcripts_per_cycle=2",
    # the tests force designer replies in the plain answer format (scaffolding has its own test)
    "designer.scaffold=false",
    "designer.hint_source=reply",
]


def small(recipe="quickstart", *extra):
    return load_recipe(recipe, [*SMALL, *extra])


def without_times(rows):
    return [
        {
            k: v
            for k, v in r.items()
            if not k.startswith("time/") and "time_s" not in k and "/sys/" not in k
        }
        for r in rows
    ]


def good_reply() -> str:
    corpus = se.load_corpus(se.example_corpus_path())
    rec = next(r for r in corpus.records if r.id == "math_modular_chain")
    # a new docstring makes it a new source (the shipped one is already in the seeded pool)
    source = '"""A designer-written copy."""\n' + corpus.source(rec.id).split("\n", 1)[1]
    return f"```python\n{source}```\nHINT: {rec.hint}\n"


class ForcedDesigner(LocalBackend):
    """The real local backend whose designer replies are forced to ``reply``."""

    def __init__(self, reply: str, **kwargs):
        super().__init__(**kwargs)
        self.reply = reply

    def generate(self, conversations, params, tools=None):
        gens = super().generate(conversations, params, tools=tools)
        out = []
        for messages, gen in zip(conversations, gens, strict=True):
            if "You design text games" not in messages[0]["content"]:
                out.append(gen)
                continue
            ids = self.tokenizer(self.reply, add_special_tokens=False)["input_ids"]
            ids = ids + [self.tokenizer.eos_token_id]
            full = torch.tensor([gen.prompt_ids + ids])
            with torch.no_grad():
                lp, _ = token_logprobs(self.model, full, torch.ones_like(full))
            logprobs = lp[0, len(gen.prompt_ids) - 1 :].tolist()
            out.append(Generation(self.reply, gen.prompt_ids, ids, logprobs[: len(ids)]))
        return out


def test_spade_cycle_runs_every_stage_for_real(tmp_path, capsys):
    cfg = small("quickstart", "cycles=1", "designer.group_size=2")
    backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
    loop = start_run(cfg, tmp_path / "run", backend=backend, progress=False)
    rows = loop.train()
    row = rows[0]
    assert row["design/completions"] == 2
    # the two forced replies are the same source: one enters the pool, the other is a duplicate
    assert row["design/valid"] == 1 and row["design/reasons"] == {"duplicate": 1}
    assert row["pool/added"] == 1
    assert row["play/envs"] == 2 and row["play/episodes"] == 2 * 1 * 2  # hint and no hint
    assert sum(row["play/ended"].values()) == row["play/episodes"]  # every end has a reason
    assert 0.0 <= row["play/parsed_rate"] <= 1.0
    assert row["reward/regret_mean"] is not None
    # hint plays feed the regret only: the agent trains on the unhinted episodes
    assert row["adv/designer_n"] == 2 and row["adv/agent_n"] == row["play/episodes"] // 2
    assert row["train/samples"] > 0 and row["train/step"] == 1
    run = tmp_path / "run"
    designs = [
        json.loads(x) for x in (run / "designs" / "cycle_0001.jsonl").read_text().splitlines()
    ]
    assert [d["valid"] for d in designs] == [True, False]
    assert designs[0]["report"]["valid"] and designs[0]["hint"]
    pool = json.loads((run / "pool.json").read_text())
    assert any(e["origin"] == "designer" and e["plays"] > 0 for e in pool["entries"])
    assert (run / "checkpoints" / "LATEST").read_text().strip() == "cycle_0001"
    plots = sorted(p.name for p in (run / "plots").glob("*.png"))
    assert plots == ["pool.png", "regret.png", "returns.png", "summary.png", "validity.png"]
    shown = sorted((run / "transcripts" / "cycle_0001").glob("*.json"))
    assert shown
    # the recipe's agent system prompt, not spade-envs' default, opens every episode
    system = json.loads(shown[0].read_text())["messages"][0]
    assert cfg.agent.system_prompt and system == {
        "role": "system",
        "content": cfg.agent.system_prompt,
    }
    from spade_train.cli import main

    assert main(["inspect", str(run)]) == 0
    out = capsys.readouterr().out
    assert "why designs failed and episodes ended" in out and "duplicate 1" in out
    assert any(end in out for end in ("won", "lost", "truncated", "malformed"))


class ForcedScaffold(ForcedDesigner):
    """Forces the scaffolded designer's continuation and the hint pass's reply; records calls."""

    def __init__(self, reply: str, hint: str, **kwargs):
        super().__init__(reply, **kwargs)
        self.hint, self.calls = hint, []

    def generate(self, conversations, params, tools=None):
        self.calls.append((conversations[0], params))
        if "You write short strategy hints" not in conversations[0][0]["content"]:
            return super().generate(conversations, params, tools=tools)
        ids = self.tokenizer(self.hint, add_special_tokens=False)["input_ids"]
        return [Generation(self.hint, [], ids, [0.0] * len(ids)) for _ in conversations]


def test_scaffolded_design_continues_the_prefill_and_takes_the_hint_pass(tmp_path):
    cfg = small(
        "quickstart",
        "cycles=1",
        "designer.scaffold=true",
        "designer.hint_source=policy",
        "designer.hint_max_new_tokens=16",
        "eval.heldout=starter",
    )
    source = good_reply().split("\n", 1)[1].split("```", 1)[0]
    backend = ForcedScaffold(
        source + "```", "HINT: Work modulo each step.", **cfg.backend.backend_kwargs(cfg.seed)
    )
    rows = start_run(cfg, tmp_path / "run", backend=backend, progress=False).train()
    (designer, design_params), (hinter, hint_params) = backend.calls[:2]
    assert designer[-1] == {"role": "assistant", "content": SCAFFOLD_PREFILL}
    assert design_params.stop == SCAFFOLD_STOP and hint_params.max_new_tokens == 16
    assert source.strip() in hinter[-1]["content"]
    row = rows[0]
    assert row["design/parsed"] == 2 and row["design/valid"] == 1 and row["pool/added"] == 1
    designs = [
        json.loads(x) for x in (tmp_path / "run/designs/cycle_0001.jsonl").read_text().splitlines()
    ]
    assert designs[0]["valid"] and designs[0]["hint"] == "Work modulo each step."
    assert row["reward/regret_mean"] is not None and row["train/samples"] > 0
    # the quickstart's pool starts with the starter corpus's 12 training games, and its six
    # held-out games are played after the cycle (never trained, never pooled)
    assert row["pool/size"] == 12 + 1
    assert row["design/new"] == int(designs[0]["copy_of"] is None)
    assert 0.0 <= row["heldout/won"] <= 1.0 and row["time/heldout_s"] > 0
    assert isinstance(row["heldout/return_hint"], float)


def test_heldout_without_hints_plays_each_game_unhinted_only(tmp_path):
    """``eval.heldout_hints=false``: a spade run that plays hinted training episodes plays the
    held-out games as a fixed run does, no hint, ``episodes_per_env`` each, no hinted mean."""
    cfg = small("quickstart", "cycles=1", "eval.heldout=starter", "eval.heldout_hints=false")
    assert cfg.mode == "spade" and cfg.agent.hint_plays_per_env > 0
    backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
    row = start_run(cfg, tmp_path / "run", backend=backend, progress=False).train()[0]
    assert row["heldout/episodes"] == 6 * cfg.agent.episodes_per_env
    assert "heldout/return_hint" not in row and 0.0 <= row["heldout/return_nohint"] <= 1.0


def test_delayed_designer_items_are_released_late_and_flushed_at_the_end(tmp_path):
    cfg = small("quickstart", "cycles=3", "reward.delay_cycles=2", "reward.designer=blend")
    backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
    rows = start_run(cfg, tmp_path / "run", backend=backend, progress=False).train()
    released = [r["reward/designer/released"] for r in rows]
    # 2 designs a cycle: nothing before cycle 1 + 2; cycle 3 releases cycle 1's and, as the
    # last cycle, flushes cycles 2 and 3 (nothing made is left untrained)
    assert released == [0, 0, 6]
    assert rows[-1]["adv/designer_n"] == 6 - rows[-1]["reward/designer/masked"]
    assert [r["adv/designer_n"] for r in rows[:2]] == [0, 0]


def test_fixed_static_and_procedural_modes(tmp_path):
    static = small("quickstart", "cycles=1", "mode=fixed-static")
    rows = start_run(static, tmp_path / "static", progress=False).train()
    assert "design/completions" not in rows[0]
    assert rows[0]["adv/designer_n"] == 0 and rows[0]["play/envs"] == 2
    proc = small("quickstart", "cycles=2", "mode=fixed-procedural", "fixed.generators=[gcd,lcm]")
    loop = start_run(proc, tmp_path / "proc", progress=False)
    rows = loop.train()
    assert [r["play/envs"] for r in rows] == [2, 2]
    state = json.loads((tmp_path / "proc/checkpoints/cycle_0002/state.json").read_text())
    assert set(state["curriculum"]["levels"]) == {"gcd", "lcm"}


def test_tool_use_cycle_plays_tool_envs(tmp_path):
    cfg = small("quickstart-tool-use", "cycles=1")
    rows = start_run(cfg, tmp_path / "run", progress=False).train()
    row = rows[0]
    assert row["play/envs"] == 2 and row["play/errors"] == 0
    assert set(row["pool/skills"]) <= set(cfg.designer.skills)
    transcripts = list((tmp_path / "run/transcripts/cycle_0001").glob("*.json"))
    assert any("tool" in t.read_text() for t in transcripts)
    # tool episodes open with the tool prompt, not the game quickstart's boxed-move prompt
    first = [json.loads(t.read_text())["messages"][0] for t in transcripts]
    assert first and all(m == {"role": "system", "content": se.TOOL_SYSTEM_PROMPT} for m in first)


def _spade(*args, env=None):
    return [sys.executable, "-m", "spade_train.cli", *args]


@pytest.mark.slow
def test_kill_and_resume_gives_the_uninterrupted_metrics(tmp_path):
    args = ["train", "--recipe", "quickstart", *SMALL, "cycles=3"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    straight = tmp_path / "straight"
    subprocess.run(
        _spade(*args, f"run_dir={straight}"), check=True, env=env, capture_output=True, timeout=900
    )
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _spade(*args, f"run_dir={killed}"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    latest = killed / "checkpoints" / "LATEST"
    deadline = time.time() + 600
    # killed as soon as cycle 1's checkpoint is committed, somewhere inside cycle 2 or 3
    while not latest.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert latest.exists(), "no checkpoint was written before the kill"
    done = [json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert len(done) < 3, "the run finished before it could be killed"
    result = subprocess.run(
        _spade("resume", str(killed)), env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-2000:]
    a = [json.loads(x) for x in (straight / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["cycle"] for r in b] == [1, 2, 3]
    assert without_times(a) == without_times(b)


def test_resume_in_process_continues_the_cycle_counter(tmp_path):
    cfg = small("quickstart", "cycles=1", "mode=fixed-static")
    start_run(cfg, tmp_path / "run", progress=False).train()
    text = (tmp_path / "run/config.yaml").read_text().replace("cycles: 1", "cycles: 2")
    (tmp_path / "run/config.yaml").write_text(text)
    loop = resume_run(tmp_path / "run", progress=False)
    assert loop.cycle == 1
    rows = loop.train()
    assert [r["cycle"] for r in rows] == [1, 2]
    with pytest.raises(FileExistsError, match="spade resume"):
        start_run(cfg, tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="config.yaml"):
        resume_run(tmp_path / "nothing")
    assert not Path(tmp_path / "nothing").exists() or not any(Path(tmp_path / "nothing").iterdir())


class _HintServer:
    """A real OpenAI-compatible endpoint on 127.0.0.1 whose first ``fail`` calls answer 500."""

    def __init__(self, fail: int):
        import http.server
        import threading

        outer = self
        self.calls = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.calls += 1
                if outer.calls <= fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                body = json.dumps(
                    {"choices": [{"message": {"content": "HINT: reduce modulo each step"}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_hint_endpoint_retries_and_a_dead_endpoint_never_aborts_the_cycle(tmp_path):
    import socket

    from spade_train.steps.design import write_hints
    from spade_train.steps.records import Design

    def designs():
        return [Design(0, i, "Math", "", Generation("", [], [], []), source="class XEnv: pass")
                for i in range(2)]  # fmt: skip

    server = _HintServer(fail=1)
    try:
        cfg = small("quickstart", "designer.hint_source=endpoint",
                    f"designer.hint_endpoint={server.url}", "designer.hint_retries=3")  # fmt: skip
        got = write_hints(cfg, None, 1, designs())
        assert [d.hint for d in got] == ["reduce modulo each step"] * 2
        assert server.calls == 3  # the failed call was tried again
    finally:
        server.close()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    cfg = small("quickstart", "designer.hint_source=endpoint", f"designer.hint_endpoint={dead}",
                "designer.hint_retries=2", "designer.hint_timeout_s=2")  # fmt: skip
    got = write_hints(cfg, None, 1, designs())
    assert [d.parse_error for d in got] == ["missing_hint", "missing_hint"]
    assert all(d.hint is None for d in got)
    # the design says why: the endpoint's one-line error, after the SDK's retries
    assert all(
        (d.parse_message or "").startswith(f"hint pass: endpoint: {dead}/v1/chat/completions: ")
        and "cannot connect" in (d.parse_message or "")
        for d in got
    )


def test_in_loop_eval_every_cycle_is_resumed_without_repeat_or_skip(tmp_path):
    pytest.importorskip("spade_eval")
    evals = ["eval.every=1", "eval.config=quick", "eval.suites=[procedural]", "eval.limit=2"]
    cfg = small("quickstart", "cycles=1", "mode=fixed-static", *evals)
    start_run(cfg, tmp_path / "run", progress=False).train()
    text = (tmp_path / "run/config.yaml").read_text().replace("cycles: 1", "cycles: 2")
    (tmp_path / "run/config.yaml").write_text(text)
    rows = resume_run(tmp_path / "run", progress=False).train()
    assert [r["cycle"] for r in rows] == [1, 2]
    for row in rows:  # one evaluation per cycle, each with the suite's scores
        assert any(k.startswith("eval/procedural") for k in row), sorted(row)
        assert row["time/eval_s"] >= 0
    assert sorted(p.name for p in (tmp_path / "run/eval").iterdir()) == [
        "cycle_0001",
        "cycle_0002",
    ]
    assert (tmp_path / "run/plots/eval.png").exists()


def test_a_full_disk_at_a_checkpoint_is_one_line_and_leaves_no_temp_dir(
    tmp_path, monkeypatch, capsys
):
    import errno

    from spade_train.cli import main

    def no_space(self, path):
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LocalBackend, "save", no_space)
    run = tmp_path / "run"
    args = ["train", "--recipe", "quickstart", "--run-dir", str(run), *SMALL]
    args += ["cycles=1", "mode=fixed-procedural", "fixed.generators=[gcd]"]
    code = main(args)
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert code == 2 and len(errors) == 1
    assert "did not fit on the disk" in errors[0] and f"spade resume {run}" in errors[0]
    assert not list((run / "checkpoints").iterdir())  # the half-written checkpoint is gone
    # torch's zip writer hides the errno: judged by the space left when it failed, before
    # the half-written checkpoint is removed (a run measured after removing it: a traceback)
    from types import SimpleNamespace

    from spade_train import loop as loop_module

    def torch_like(self, path):
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 58 vs 57")

    def usage(where):
        half = list(Path(where).glob("*/policy/model.safetensors"))
        return SimpleNamespace(total=2**40, used=2**40, free=0 if half else 2**35)

    monkeypatch.setattr(LocalBackend, "save", torch_like)
    monkeypatch.setattr(loop_module.shutil, "disk_usage", usage)
    run3 = tmp_path / "run3"
    code = main(["train", "--recipe", "quickstart", "--run-dir", str(run3), *SMALL,
                 "cycles=1", "mode=fixed-procedural", "fixed.generators=[gcd]"])  # fmt: skip
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "did not fit on the disk" in errors[0]
    monkeypatch.undo()
    monkeypatch.setattr(LocalBackend, "save", no_space)
    # another failure while writing (not the disk) is not dressed up as a full disk
    monkeypatch.setattr(LocalBackend, "save", lambda self, path: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        start_run(
            small("quickstart", "cycles=1", "mode=fixed-procedural", "fixed.generators=[gcd]"),
            tmp_path / "run2",
            progress=False,
        ).train()
