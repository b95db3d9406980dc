"""ACEBench: working copy, score files read as its scorer writes them, the weighted overall,
skips with their reason, and (where a checkout and its interpreter exist) a real run of
ACEBench's generate.py and eval_main.py against a localhost server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from spade_eval import CallableClient, EvalDataError, OpenAIClient, evaluate
from spade_eval.suites import acebench


def write_scores(copy: Path, accuracies: dict, wrong: dict | None = None):
    score = copy / "score_all" / "score_en" / acebench.LABEL
    result = copy / "result_all" / "result_en" / acebench.LABEL
    score.mkdir(parents=True)
    result.mkdir(parents=True)
    for name, acc in accuracies.items():
        key = "end_to_end_accuracy" if name.startswith("agent") else "accuracy"
        bad = (wrong or {}).get(name, [])
        lines = [{key: acc, "correct_count": 2 - len(bad), "total_count": 2}]
        lines += [{"id": f"{name}_{i}", "valid": False, "error_type": "value_error"} for i in bad]
        (score / f"data_{name}_score.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
        (result / f"data_{name}_result.json").write_text(
            "".join(
                json.dumps({"id": f"{name}_{i}", "result": "[f(a=1)]"}) + "\n" for i in range(2)
            )
        )


def test_groups_and_weighted_overall(tmp_path):
    # upstream's check of the weights: ACEBench's Gemini row 76.7 / 90.0 / 63.4 -> 78.2
    write_scores(tmp_path, {"normal_atom_bool": 0.767, "special_incomplete": 0.90,
                            "agent_multi_turn": 0.634}, {"normal_atom_bool": [1]})  # fmt: skip
    records, metrics = acebench.group_scores(tmp_path)
    assert round(100 * metrics["acebench/en/overall"], 1) == 78.2
    assert metrics["acebench/en/normal"] == 0.767
    scores = {r["item_id"]: r["score"] for r in records}
    assert scores["normal_atom_bool/normal_atom_bool_1"] == 0.0
    assert scores["normal_atom_bool/normal_atom_bool_0"] == 1.0 and len(scores) == 6


def test_group_means_and_no_overall_without_agent(tmp_path):
    write_scores(tmp_path, {"normal_atom_bool": 1.0, "normal_atom_enum": 0.5,
                            "special_irrelevant": 0.25})  # fmt: skip
    _, metrics = acebench.group_scores(tmp_path)
    assert metrics == {"acebench/en/normal": 0.75, "acebench/en/special": 0.25}


def test_working_copy_keeps_the_asked_categories(tmp_path):
    src = tmp_path / "src"
    data = src / "data_all" / "data_en"
    (data / "possible_answer").mkdir(parents=True)
    (src / ".git").mkdir()
    for name in ("normal_atom_bool", "special_irrelevant"):
        for d in (data, data / "possible_answer"):
            (d / f"data_{name}.json").write_text(
                "".join(f'{{"id": "{name}_{i}"}}\n' for i in range(5))
            )
    acebench.working_copy(src, tmp_path / "copy", ["normal_atom_bool"], limit=2)
    kept = sorted(p.name for p in (tmp_path / "copy").rglob("data_*.json"))
    assert kept == ["data_normal_atom_bool.json", "data_normal_atom_bool.json"]
    assert (
        len(
            (tmp_path / "copy/data_all/data_en/data_normal_atom_bool.json").read_text().splitlines()
        )
        == 2
    )
    assert not (tmp_path / "copy" / ".git").exists()


def test_skips_and_missing_checkout(tmp_path, monkeypatch):
    res = evaluate(CallableClient(lambda b, s: [""] * len(b)), {"suites": {"acebench": {}}},
                   tmp_path / "a", progress=False)  # fmt: skip
    assert "endpoint" in res["skipped"]["acebench"]
    monkeypatch.delenv("ACEBENCH_DIR", raising=False)
    with pytest.raises(EvalDataError, match=r"ACEBENCH_DIR; git clone https://github.com/ACEBench"):
        evaluate(OpenAIClient("http://127.0.0.1:9", "m"), {"suites": {"acebench": {}}},
                 tmp_path / "b", progress=False)  # fmt: skip


CATEGORIES = ["normal_single_turn_single_function", "normal_atom_bool", "special_incomplete",
              "special_error_param", "special_irrelevant"]  # fmt: skip


def gold_reply(category: str, truth) -> str:
    if category == "special_incomplete":
        ((name, values),) = truth.items()
        return (
            f"Missing necessary parameters ({', '.join(values)}) for the api ({name})"  # verbatim
        )
    if category == "special_error_param":
        ((name, values),) = truth.items()
        return f"There is incorrect value ({', '.join(values)}) for the parameters ({name}) in the conversation history."
    if category == "special_irrelevant":
        return str(truth)
    calls = truth if isinstance(truth, list) else [truth]
    parts = [
        f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for c in calls for n, a in c.items()
    ]
    return "[" + ", ".join(parts) + "]"


class AceServer:
    def __init__(self, root: Path, right: bool):
        table = []
        for cat in CATEGORIES:
            data = (root / "data_all/data_en" / f"data_{cat}.json").read_text().splitlines()[:3]
            gold = (
                (root / "data_all/data_en/possible_answer" / f"data_{cat}.json")
                .read_text()
                .splitlines()[:3]
            )
            for d, g in zip(data, gold, strict=True):
                rec = json.loads(d)
                fns = rec["function"] if isinstance(rec["function"], list) else [rec["function"]]
                table.append(
                    (rec["question"], str(fns), gold_reply(cat, json.loads(g)["ground_truth"]))
                )
        self.models = []

        def reply(messages, model):
            self.models.append(model)
            text, system = messages[-1]["content"], messages[0]["content"]
            for question, functions, answer in table:  # one question can recur across categories
                if question in text and functions in system:
                    return answer if right else "I am not sure."
            return "I am not sure."

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant", "content": reply(body["messages"], body["model"])}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("right", [True, False])
def test_acebench_end_to_end_against_localhost(tmp_path, right, monkeypatch):
    root = acebench.checkout()
    if root is None or not (root / "eval_main.py").is_file() or not acebench.python().is_file():
        pytest.skip(
            "no ACEBench checkout (ACEBENCH_DIR) or interpreter (spade-eval setup-acebench)"
        )
    monkeypatch.delenv("SPADE_USER_BASE_URL", raising=False)
    server = AceServer(root, right)
    try:
        cfg = {"suites": {"acebench": {"categories": CATEGORIES + ["agent_multi_turn"], "limit": 3,
                                       "num_threads": 2}}}  # fmt: skip
        res = evaluate(OpenAIClient(server.url, "served-name"), cfg, tmp_path, progress=False)
    finally:
        server.close()
    m = res["metrics"]
    want = 1.0 if right else 0.0
    assert m["acebench/en/normal"] == m["acebench/en/special"] == want
    assert "acebench/en/overall" not in m and m["acebench/en/agent_skipped"] == 1.0
    assert res["suites"]["acebench"]["n"] == 15 and res["suites"]["acebench"]["mean"] == want
    assert set(server.models) == {"served-name"}
