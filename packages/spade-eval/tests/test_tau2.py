"""tau2-bench: results read back, skips with their reason, and (where the tau2 environment
exists) tau2's own run command on a three-task retail fixture, the agent and the user
simulator on two localhost servers."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from spade_eval import CallableClient, OpenAIClient, evaluate
from spade_eval.suites import tau2

DATA = Path(__file__).parent / "fixtures" / "tau2_data"
TASKS = {t["id"]: t for t in json.loads((DATA / "tau2/domains/retail/tasks.json").read_text())}


def test_read_results_pass_at_1_counts_errors_as_failures(tmp_path):
    sims = [{"task_id": "a", "trial": 0, "termination_reason": "user_stop", "reward_info": {"reward": 1.0}},
            {"task_id": "a", "trial": 1, "termination_reason": "user_stop", "reward_info": {"reward": 0.9999999}},
            {"task_id": "b", "trial": 0, "termination_reason": "too_many_errors", "reward_info": {"reward": 0.0}},
            {"task_id": "c", "trial": 0, "termination_reason": "max_steps", "reward_info": None}]  # fmt: skip
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"simulations": sims}))
    records, keys = tau2.read_results(path, "retail", "base")
    assert keys == {"gem_eval/tau2_retail_base/pass_at_1": 0.5,
                    "gem_eval/tau2_retail_base/num_simulations": 4.0,
                    "gem_eval/tau2_retail_base/errors": 1.0}  # fmt: skip
    assert [r["item_id"] for r in records][:2] == ["retail/a/0", "retail/a/1"]


def test_skipped_without_endpoint_or_user_simulator(tmp_path, monkeypatch):
    monkeypatch.delenv("SPADE_USER_BASE_URL", raising=False)
    res = evaluate(CallableClient(lambda b, s: [""] * len(b)), {"suites": {"tau2": {}}},
                   tmp_path / "a", progress=False)  # fmt: skip
    assert "endpoint" in res["skipped"]["tau2"]
    res = evaluate(OpenAIClient("http://127.0.0.1:9", "m"), {"suites": {"tau2": {}}},
                   tmp_path / "b", progress=False)  # fmt: skip
    assert res["skipped"]["tau2"].startswith("tau2 needs a user simulator: pass --user-base-url")


def fake_agent(messages, right):
    said = " ".join(m.get("content") or "" for m in messages if m["role"] == "user")
    found = re.search(r"TASK-([\w-]+)", said)
    if not right or not found:
        return {"role": "assistant", "content": "Sorry, I cannot help with that."}
    actions = TASKS[found.group(1)]["evaluation_criteria"]["actions"]
    done = sum(1 for m in messages if m["role"] == "tool")
    if done < len(actions):
        a = actions[done]
        call = {"id": f"call_{done}", "type": "function",
                "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": "Done: your request is complete."}


def fake_user(messages):
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if any(m["role"] == "assistant" for m in messages):
        return {"role": "assistant", "content": "###STOP###"}  # the agent answered: end
    for tid, task in TASKS.items():
        if task["user_scenario"]["instructions"]["reason_for_call"] in system:
            return {"role": "assistant", "content": f"TASK-{tid}: please help me."}
    return {"role": "assistant", "content": "TASK-unknown"}


def serve(reply):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            msg = reply(body["messages"])
            data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "message": msg,
                                            "finish_reason": "tool_calls" if msg.get("tool_calls") else "stop"}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.slow
@pytest.mark.parametrize("right", [True, False])
def test_tau2_end_to_end_with_a_user_simulator(tmp_path, right, monkeypatch):
    if not tau2.python().is_file():
        pytest.skip(f"no tau2-bench environment at {tau2.python()}; run `spade-eval setup-tau2`")
    agent, agent_url = serve(lambda m: fake_agent(m, right))
    user, user_url = serve(fake_user)
    monkeypatch.setenv("TAU2_DATA_DIR", str(DATA))
    monkeypatch.setenv("SPADE_USER_BASE_URL", user_url)
    try:
        cfg = {"sampling": {"temperature": 0.0},
               "suites": {"tau2": {"domains": ["retail"], "num_trials": 1, "max_concurrency": 3}}}  # fmt: skip
        res = evaluate(OpenAIClient(agent_url, "served"), cfg, tmp_path, progress=False)
    finally:
        agent.shutdown()
        user.shutdown()
    m = res["metrics"]
    want = 1.0 if right else 0.0
    assert m["gem_eval/tau2_retail_base/pass_at_1"] == want
    assert m["gem_eval/tau2_retail_base/num_simulations"] == 3.0
    assert res["suites"]["tau2"]["n"] == 3 and res["suites"]["tau2"]["mean"] == want
