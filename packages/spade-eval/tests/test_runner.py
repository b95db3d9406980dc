import json
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import spade_envs as se
from spade_eval import (
    CallableClient,
    EvalConfigError,
    ModelError,
    OpenAIClient,
    evaluate,
    render_results,
)
from spade_eval.render_table import main as table_main
from spade_eval.suites import tool_use

PY = sys.executable


def correct_reply(item) -> str:
    calls = []
    for truth in item.answer:
        ((name, args),) = truth.items()
        kw = {k: next(v for v in vals if v != "") for k, vals in args.items() if vals != [""]}
        kw = {k: v for k, v in kw.items()}
        calls.append(f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")")
    return "[" + ", ".join(calls) + "]"


def tool_config(limit=None, batch_size=64):
    suite = {"limit": limit} if limit else {}
    return {"seed": 0, "batch_size": batch_size, "suites": {"tool_use": suite}}


class Replay:
    """A localhost OpenAI-compatible server replaying fixed replies keyed by the user message,
    failing the first attempt of some prompts with HTTP 500 (``fail``) or 429 (``throttle``)
    and stalling others past the timeout."""

    def __init__(self, replies, fail=(), slow=(), stall_s=0.6, latency_s=0.0, throttle=()):
        self.replies, self.fail, self.slow = replies, set(fail), set(slow)
        self.throttle = set(throttle)
        self.stall_s, self.latency_s = stall_s, latency_s
        self.attempts: Counter = Counter()
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = body["messages"][-1]["content"]
                with owner.lock:
                    owner.attempts[key] += 1
                    first = owner.attempts[key] == 1
                if first and (key in owner.fail or key in owner.throttle):
                    self.send_response(500 if key in owner.fail else 429)
                    self.end_headers()
                    return
                if first and key in owner.slow:
                    time.sleep(owner.stall_s)
                time.sleep(owner.latency_s)
                reply = {
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "content": owner.replies.get(key, "no idea"),
                            }
                        }
                    ]
                }
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_end_to_end_http_with_retries(tmp_path):
    items = tool_use.load({})
    replies = {
        it.prompt[-1]["content"]: correct_reply(it) if i % 2 == 0 else "nope"
        for i, it in enumerate(items)
    }
    keys = list(replies)
    server = Replay(replies, fail=keys[0::6], throttle=keys[3::6], slow=keys[1::3], stall_s=1.5)
    try:
        client = OpenAIClient(server.url, "replay", concurrency=8, timeout_s=0.5)
        summary = evaluate(client, tool_config(), tmp_path, progress=False)
    finally:
        server.close()
    s = summary["suites"]["tool_use"]
    assert s["n"] == len(items)
    assert s["mean"] == pytest.approx(len(items[0::2]) / len(items))
    assert summary["model"] == "replay"
    # every injected 500, 429 and stall was retried; a slow machine may add retries, never fewer
    assert all(server.attempts[k] >= 2 for k in keys[0::3] + keys[1::3])
    assert sum(server.attempts.values()) >= len(items) + len(keys[0::3]) + len(keys[1::3])
    assert client.requests >= sum(server.attempts.values())
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk == summary
    recs = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert {r["item_id"] for r in recs} == {i.id for i in items}
    assert all({"prompt", "response", "extracted", "score", "sample"} <= set(r) for r in recs)


def test_client_gives_up_with_clear_error():
    server = Replay({}, fail=[])
    server.fail = {"x"}  # first attempt fails; with no retries that is final
    try:
        client = OpenAIClient(server.url, "m", max_retries=0)
        with pytest.raises(ModelError, match="completions: failed after 1 attempts: HTTP 500"):
            client.complete([[{"role": "user", "content": "x"}]], {})
    finally:
        server.close()
    dead = OpenAIClient("http://127.0.0.1:9", "m", max_retries=1, timeout_s=0.5)
    with pytest.raises(ModelError, match="failed after 2 attempts: cannot connect"):
        dead.complete([[{"role": "user", "content": "x"}]], {})
    assert dead.requests == 2 and dead.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(EvalConfigError, match="not an http"):
        OpenAIClient("127.0.0.1:9", "m")


def test_resume_after_interruption(tmp_path):
    items = tool_use.load({"limit": 12})
    answers = {it.prompt[-1]["content"]: correct_reply(it) for it in items}
    seen: list[int] = []

    def flaky(batch, sampling):
        seen.append(len(batch))
        if len(seen) == 3:
            raise RuntimeError("killed")
        return [answers[c[-1]["content"]] for c in batch]

    with pytest.raises(RuntimeError, match="killed"):
        evaluate(
            CallableClient(flaky), tool_config(limit=12, batch_size=4), tmp_path, progress=False
        )
    assert seen == [4, 4, 4]
    # a torn last line, as a kill mid-write would leave
    with open(tmp_path / "records.jsonl", "a") as fh:
        fh.write('{"suite": "tool_use", "item_')
    calls: list[int] = []

    def good(batch, sampling):
        calls.append(len(batch))
        return [answers[c[-1]["content"]] for c in batch]

    summary = evaluate(
        CallableClient(good), tool_config(limit=12, batch_size=4), tmp_path, progress=False
    )
    assert calls == [4]
    assert summary["suites"]["tool_use"]["n"] == 12
    assert summary["suites"]["tool_use"]["mean"] == 1.0
    calls.clear()
    evaluate(CallableClient(good), tool_config(limit=12, batch_size=4), tmp_path, progress=False)
    assert calls == []


def test_samples_and_pass_at_k(tmp_path):
    items = tool_use.load({"limit": 4})
    answers = {it.prompt[-1]["content"]: correct_reply(it) for it in items}

    def half(batch, sampling):  # right only on even seeds
        return [answers[c[-1]["content"]] if sampling["seed"] % 2 == 0 else "x" for c in batch]

    summary = evaluate(
        CallableClient(half), tool_config(limit=4), tmp_path, samples=4, progress=False
    )
    s = summary["suites"]["tool_use"]
    assert s["mean"] == pytest.approx(0.5) and s["avg@4"] == pytest.approx(0.5)
    assert s["pass@1"] == pytest.approx(0.5)
    assert s["pass@2"] == pytest.approx(1 - 1 / 6)
    assert s["pass@4"] == pytest.approx(1.0)


def test_procedural_games_through_spade_envs(tmp_path):
    calls: list[int] = []

    def agent(batch, sampling):
        calls.append(len(batch))
        return ["\\boxed{0}"] * len(batch)

    cfg = {"suites": {"procedural": {"tasks": [], "episodes_per_game": 1}}}
    summary = evaluate(CallableClient(agent), cfg, tmp_path, progress=False)
    s = summary["suites"]["procedural"]
    assert s["n"] == 12  # the twelve held-out games of the example corpus (two per skill)
    assert 0.0 <= s["mean"] <= 1.0 and calls
    recs = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert all(r["item_id"].startswith("game/") and not r["detail"] for r in recs)
    calls.clear()
    evaluate(CallableClient(agent), cfg, tmp_path, progress=False)
    assert calls == []


def _results(tmp_path, name, model, suites):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"model": model, "suites": suites}))
    return str(d)


def test_render_table_cells(tmp_path):
    a = _results(
        tmp_path,
        "a",
        "base",
        {"math": {"mean": 0.25, "stderr": 0.05}, "code": {"mean": 0.5, "stderr": 0.125}},
    )
    b = _results(tmp_path, "b", "spade_rl", {"code": {"mean": 0.625, "stderr": 0.01}})
    from spade_eval import read_results

    md = render_results(read_results([a, b]), "markdown").splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in md]
    assert cells[0] == ["model", "math", "code"]
    assert cells[2] == ["base", "25.0 ± 5.0", "50.0 ± 12.5"]
    assert cells[3] == ["spade_rl", "", "62.5 ± 1.0"]
    csv_rows = [r.split(",") for r in render_results(read_results([a, b]), "csv").splitlines()]
    assert csv_rows[0] == ["model", "math_mean", "math_stderr", "code_mean", "code_stderr"]
    assert csv_rows[1] == ["base", "0.2500", "0.0500", "0.5000", "0.1250"]
    assert csv_rows[2] == ["spade_rl", "", "", "0.6250", "0.0100"]
    tex = render_results(read_results([a, b]), "latex").splitlines()
    assert tex[2] == r"model & math & code \\"
    assert tex[4] == r"base & 25.0 $\pm$ 5.0 & 50.0 $\pm$ 12.5 \\"
    png = tmp_path / "bars.png"
    assert table_main([a, b, "--format", "csv", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("module", "args", "needle"),
    [
        (
            "spade_eval.run",
            ["--model", "http://127.0.0.1:9", "--suites", "nope", "--out", "OUT"],
            "unknown suite 'nope'",
        ),
        (
            "spade_eval.run",
            ["--model", "/no/such/dir", "--suites", "tool_use", "--out", "OUT"],
            "not a directory",
        ),
        (
            "spade_eval.run",
            ["--model", "m", "--base-url", "127.0.0.1:9", "--suites", "tool_use", "--out", "OUT"],
            "'127.0.0.1:9': not an http:// or https:// URL",
        ),
        (
            "spade_eval.run",
            ["--model", "http://127.0.0.1:9", "--user-base-url", "h:1", "--out", "OUT"],
            "--user-base-url 'h:1': not an http",
        ),
        (
            "spade_eval.run",
            ["--model", "x", "--config", "/no/cfg.yaml", "--out", "OUT"],
            "does not exist",
        ),
        ("spade_eval.render_table", ["/no/results.json"], "not a spade-eval results.json"),
    ],
)
def test_cli_errors_one_line(tmp_path, module, args, needle):
    args = [a.replace("OUT", str(tmp_path / "o")) for a in args]
    proc = subprocess.run([PY, "-m", module, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and needle in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_cli_run_against_server(tmp_path):
    items = tool_use.load({"limit": 5})
    server = Replay({it.prompt[-1]["content"]: correct_reply(it) for it in items})
    try:
        cmd = [
            PY,
            "-m",
            "spade_eval.cli",
            "run",
            "--model",
            "m",
            "--base-url",
            server.url,
            "--config",
            "quick",  # the BFCL-style items only (default also plays the tool environments)
            "--suites",
            "tool_use",
            "--limit",
            "5",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert "tool_use: 1.0000" in proc.stdout
    assert json.loads((tmp_path / "results.json").read_text())["suites"]["tool_use"]["n"] == 5


def test_resume_after_sigkill(tmp_path):
    import signal

    from spade_eval import RecordStore

    items = tool_use.load({})
    server = Replay({it.prompt[-1]["content"]: correct_reply(it) for it in items}, latency_s=0.1)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("batch_size: 4\nsuites:\n  tool_use: {}\n")
    out = tmp_path / "out"
    cmd = [PY, "-m", "spade_eval.run", "--model", "m", "--base-url", server.url, "--config",
           str(cfg), "--out", str(out), "--concurrency", "4", "--no-progress"]  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        records = out / "records.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and records.read_text().count("\n") >= 8:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        done = len(RecordStore(out).records)
        assert 8 <= done < len(items)
        server.attempts.clear()
        client = OpenAIClient(server.url, "m", concurrency=4)
        summary = evaluate(client, str(cfg), out, progress=False)
    finally:
        server.close()
    assert sum(server.attempts.values()) == len(items) - done
    assert summary["suites"]["tool_use"]["n"] == len(items)
    assert summary["suites"]["tool_use"]["mean"] == 1.0


def test_game_episodes_failing_in_the_model_stay_unscored(tmp_path):
    def broken(batch, sampling):
        raise ConnectionError("endpoint down")

    cfg = {"suites": {"procedural": {"tasks": [], "episodes_per_game": 1}}}
    with pytest.raises(ModelError, match="failed outside the environment"):
        evaluate(CallableClient(broken), cfg, tmp_path, progress=False)
    assert not (tmp_path / "records.jsonl").exists() or not (tmp_path / "records.jsonl").read_text()


def solution_agent(corpus_path, split, seeds):
    """Plays each environment's own solution(): the episode is found by its first observation;
    chats it does not know (the BFCL-style items) get an empty reply."""
    corpus = se.load_corpus(corpus_path)
    plans = {}
    for rec in corpus:
        if rec.split == split:
            env = se.load_env(corpus.source(rec.id), rec.class_name)(max_turns=rec.max_turns)
            for seed in seeds:
                observation, _ = env.reset(seed=seed)
                plans[observation] = se.solution_actions(env.solution())

    def agent(batch, sampling):
        replies = []
        for chat in batch:
            first = next(m["content"] for m in chat if m["role"] == "user")
            turn = sum(m["role"] == "assistant" for m in chat)
            replies.append(plans[first][turn] if first in plans else "")
        return replies

    return agent, len({r.id for r in corpus if r.split == split})


def test_tool_use_suite_scores_the_tool_corpus_heldout_environments(tmp_path):
    suite = {"categories": ["simple"], "limit": 2, "environments": True, "episodes_per_env": 1}
    cfg = {"suites": {"tool_use": suite}}
    solver, heldout = solution_agent(se.tool_use_corpus_path(), "heldout", [0])
    assert heldout >= 5
    s = evaluate(CallableClient(solver), cfg, tmp_path / "solver", progress=False)["suites"]
    parts = s["tool_use"]["parts"]
    assert parts["env"] == {"mean": 1.0, "n": heldout} and parts["items"]["n"] == 2
    recs = [json.loads(x) for x in (tmp_path / "solver" / "records.jsonl").read_text().splitlines()]
    env_recs = [r for r in recs if r["item_id"].startswith("env/")]
    assert len(env_recs) == heldout and all(not r["detail"] for r in env_recs)
    assert any("tool" in json.dumps(r["prompt"][0]) for r in env_recs)  # tools were shown

    def guesser(batch, sampling):
        return ["\\boxed{0}"] * len(batch)

    s = evaluate(CallableClient(guesser), cfg, tmp_path / "guess", progress=False)["suites"]
    assert s["tool_use"]["parts"]["env"]["mean"] == 0.0
