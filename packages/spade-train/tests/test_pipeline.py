"""The designer pipeline (``designer.pipeline``) on the tiny policy with teacher-forced designer
replies: reset gate, LLM validator (a real localhost server), retries, repair turns, budgets,
self-judge, and an LLM-validator endpoint that is down (fail open, reported once per cycle)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from spade_train.config import load_recipe
from spade_train.core import judges
from spade_train.loop import start_run
from spade_train.types import Generation
from test_loop import SMALL, ForcedDesigner, good_reply

GOOD = good_reply()
SOURCE = GOOD.split("```python\n", 1)[1].split("```", 1)[0]
HINT_LINE = "HINT: " + GOOD.rsplit("HINT: ", 1)[1]


def reply(source: str) -> str:
    return f"```python\n{source}```\n{HINT_LINE}"


def variant(tag: str, source: str = SOURCE) -> str:
    """A distinct source (a new first docstring line) so the pool takes each one."""
    return source.replace('"""A designer-written copy."""', f'"""A designer-written copy {tag}."""')


# a criterion that reads a key reset never sets: it raises KeyError at every seed
GATED = SOURCE.replace(
    "        self._done = False\n",
    "        self._done = False\n"
    "        self._state = {'turn': 0}\n"
    "        self._message_criteria = [lambda s: s['finished'] is True]\n",
    1,
)
# reset returns the observation alone: the sandbox validator rejects it
BROKEN = SOURCE.replace("return observation, self._info()", "return observation", 1)


class Scripted(ForcedDesigner):
    """Forces designer replies from a queue (one per designer conversation, repairs included),
    records the conversations and the trained samples."""

    def __init__(self, replies: list[str], **kwargs):
        super().__init__(replies[0], **kwargs)
        self.queue = list(replies)
        self.designer_convs: list[list[dict]] = []
        self.trained: list = []
        self.judge_reply: str | None = None
        self.judge_convs: list[list[dict]] = []

    def generate(self, conversations, params, tools=None):
        out = []
        for conv in conversations:
            if self.judge_reply is not None and conv[0]["content"] == judges.JUDGE_SYSTEM:
                self.judge_convs.append(conv)
                ids = self.tokenizer(self.judge_reply, add_special_tokens=False)["input_ids"]
                out.append(Generation(self.judge_reply, [], ids, [0.0] * len(ids)))
                continue
            if "You design text games" in conv[0]["content"]:
                self.reply = self.queue.pop(0)
                self.designer_convs.append(conv)
            out += super().generate([conv], params, tools=tools)
        return out

    def train_step(self, samples):
        self.trained = list(samples)
        return super().train_step(samples)


def run(tmp_path, replies, *extra, judge_reply=None):
    cfg = load_recipe("quickstart", [*SMALL, "cycles=1", "designer.group_size=1", *extra])
    backend = Scripted(replies, **cfg.backend.backend_kwargs(cfg.seed))
    backend.judge_reply = judge_reply
    row = start_run(cfg, tmp_path / "run", backend=backend, progress=False).train()[0]
    rows = (tmp_path / "run/designs/cycle_0001.jsonl").read_text().splitlines()
    return row, [json.loads(x) for x in rows], backend


def test_reset_gate_rejects_criteria_that_raise_at_every_seed(tmp_path):
    row, designs, _ = run(
        tmp_path,
        [reply(GATED)],
        "designer.pipeline.reset_gate.enabled=true",
        "designer.pipeline.reset_gate.skip_first_cycle=false",
    )
    (d,) = designs
    assert d["report"]["valid"] and not d["valid"]  # the sandbox passed it, the gate did not
    assert d["reason"] == "reset_gate"
    assert d["pipeline"]["reset_gate"] == {"status": "reject", "checked": 3, "threw": 3}
    assert row["design/reasons"] == {"reset_gate": 1} and row["pool/added"] == 0


def test_reset_gate_passes_a_game_without_criteria_and_skips_the_first_cycle(tmp_path):
    row, designs, _ = run(tmp_path, [reply(GATED)], "designer.pipeline.reset_gate.enabled=true")
    assert designs[0]["valid"] and "reset_gate" not in designs[0]["pipeline"]
    result = judges.reset_gate(SOURCE, "ModularChainEnv", 6, 3, _sandbox_config())
    assert result.status == "not_applicable" and not result.rejected


def _sandbox_config():
    import spade_sandbox as ss

    return ss.SandboxConfig.from_env()


class _Server:
    """A real OpenAI-compatible chat-completions server on 127.0.0.1 (one fixed answer)."""

    def __init__(self, status: int, content: str = ""):
        outer = self
        self.requests: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                )
                data = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _validator(url: str) -> list[str]:
    return [
        "designer.pipeline.validator.enabled=true",
        "designer.pipeline.validator.judge=endpoint",
        f"designer.pipeline.validator.endpoint={url}",
        "designer.pipeline.validator.model=judge-model",
        "designer.pipeline.validator.timeout_s=5",
    ]


def test_validator_no_rejects_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = _Server(200, "The check can never pass. \\boxed{no}")
    try:
        row, designs, _ = run(tmp_path, [reply(SOURCE)], *_validator(server.url))
    finally:
        server.close()
    (d,) = designs
    assert d["reason"] == "llm_validator_rejected" and d["report"]["valid"]
    assert d["pipeline"]["validator"]["status"] == "no"
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions" and req["model"] == "judge-model"
    assert req["auth"] == "Bearer test-key"
    assert "Can a player actually play and win this game?" in req["messages"][1]["content"]
    assert row["design/validator_errors"] == 0 and row["pool/added"] == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


@pytest.mark.parametrize("down", ["refused", "http500"])
def test_validator_endpoint_down_fails_open_reported_once_per_cycle(tmp_path, caplog, down):
    server = _Server(500, "oops") if down == "http500" else None
    url = server.url if server else f"http://127.0.0.1:{_closed_port()}/v1"
    caplog.set_level(logging.WARNING, logger="spade_train.pipeline")
    try:
        row, designs, _ = run(
            tmp_path,
            [reply(variant("a")), reply(variant("b"))],
            "designer.group_size=2",
            *_validator(url),
        )
    finally:
        if server:
            server.close()
    assert [d["valid"] for d in designs] == [True, True]  # fail open: both accepted
    assert all(d["pipeline"]["validator"]["status"] == "error" for d in designs)
    # the failure is the endpoint's one-line error, naming the URL, after the SDK's retries
    why = str(designs[0]["pipeline"]["validator"])
    assert f"EndpointError: {url}/chat/completions: failed after 3 attempts" in why
    if server:
        assert len(server.requests) == 2 * 3  # 500 is retried twice per environment
    assert row["design/validator_errors"] == 2 and row["pool/added"] == 2
    warnings = [r for r in caplog.records if "LLM validator could not be asked" in r.message]
    assert len(warnings) == 1 and "2 time(s)" in warnings[0].message
    assert row["train/step"] == 1  # the cycle went on


def test_retry_after_a_parse_failure_keeps_the_new_attempt(tmp_path):
    row, designs, backend = run(
        tmp_path, ["no code in this reply", reply(SOURCE)], "designer.pipeline.max_attempts=3"
    )
    (d,) = designs
    assert d["valid"] and d["pipeline"]["attempts"][0]["reason"] == "no_code_block"
    assert len(d["pipeline"]["attempts"]) == 1  # the third attempt was not needed
    assert row["design/attempts"] == 2 and row["pool/added"] == 1
    assert backend.designer_convs[0] == backend.designer_convs[1]  # the same prompt again


def test_budget_exhausted_stops_the_retries(tmp_path):
    row, designs, backend = run(
        tmp_path,
        ["no code in this reply", reply(SOURCE)],
        "designer.pipeline.max_attempts=3",
        "designer.pipeline.cycle_budget_s=0.001",
    )
    (d,) = designs
    assert not d["valid"] and d["reason"] == "no_code_block"
    assert d["pipeline"]["budget_exhausted"] is True
    assert row["design/budget_exhausted"] == 1 and row["design/attempts"] == 1
    assert len(backend.queue) == 1  # no second generation was asked for


def test_a_slow_generation_round_fails_its_attempts(tmp_path):
    row, designs, _ = run(
        tmp_path,
        ["no code in this reply", reply(SOURCE)],
        "designer.pipeline.max_attempts=2",
        "designer.pipeline.generation_budget_s=0.000001",
    )
    (d,) = designs
    assert d["reason"] == "generation_timeout" and not d["valid"]
    assert row["design/reasons"] == {"generation_timeout": 1}


def test_repair_makes_the_environment_valid_and_trains_turn_one_only(tmp_path):
    bad1, bad2 = reply(variant("x", BROKEN)), reply(variant("y", BROKEN))
    fixed = reply(variant("fixed"))
    row, designs, backend = run(
        tmp_path,
        [bad1, bad2, fixed, bad2],  # turn 1 of both slots, then one repair turn of each
        "designer.group_size=2",
        "designer.pipeline.repair_turns=1",
        "designer.pipeline.repaired_reward=0.5",
    )
    repaired, failed = designs
    assert repaired["valid"] and repaired["repaired_turn"] == 1
    assert repaired["pipeline"]["turn1"]["reason"] == failed["reason"]
    assert repaired["text"] == bad1  # the trained reply is the first one
    assert not failed["valid"] and failed["pipeline"]["repairs"][0]["reason"] == failed["reason"]
    repair_conv = backend.designer_convs[2]  # the first reply and its failure were shown
    assert repair_conv[-2] == {"role": "assistant", "content": bad1}
    assert failed["reason"] in repair_conv[-1]["content"]
    assert row["design/repaired"] == 1 and row["design/repair_turns"] == 2
    assert row["pool/added"] == 1  # the repaired environment entered the pool
    pool = json.loads((tmp_path / "run/pool.json").read_text())
    assert any("copy fixed" in e["source"] for e in pool["entries"])
    tok = backend.tokenizer
    designer = [s for s in backend.trained if s.role == "designer"]
    assert len(designer) == 2
    eos = [tok.eos_token_id]
    by_text = {}
    for s in designer:  # the loss covers exactly the first reply's tokens
        trained = [t for t, m in zip(s.input_ids, s.loss_mask, strict=True) if m]
        for text in (bad1, bad2, fixed):
            if trained == tok(text, add_special_tokens=False)["input_ids"] + eos:
                by_text[text] = s.advantage
    assert set(by_text) == {bad1, bad2}  # no sample trains the repair turn's tokens
    assert by_text[bad1] > 0 > by_text[bad2]  # repaired_reward 0.5 against the penalty -1


def test_config_refuses_retries_with_repairs():
    from spade_train.errors import RecipeError

    with pytest.raises(RecipeError, match="exclude each other"):
        load_recipe(
            "quickstart",
            ["designer.pipeline.max_attempts=2", "designer.pipeline.repair_turns=1"],
        )


def test_verdicts_parse_like_upstream():
    assert judges.parse_verdict("fine \\boxed{Yes}").status == "yes"
    assert not judges.parse_verdict("\\boxed{no} ... \\boxed{yes}").accepted  # the first box
    assert judges.parse_verdict("\\boxed{ TRUE }").accepted
    assert not judges.parse_verdict("\\boxed{maybe}").accepted
    assert judges.parse_verdict("no box here").status == "no_verdict"
    assert judges.parse_verdict("").accepted


def test_self_judge_no_costs_the_designer_its_penalty(tmp_path):
    row, designs, backend = run(
        tmp_path,
        [reply(SOURCE)],
        "designer.pipeline.self_judge.enabled=true",
        "reward.designer=regret",
        "reward.copy_reward=null",  # the forced design copies a shipped game on purpose
        judge_reply="The rewards do not follow the rules. \\boxed{no}",
    )
    (d,) = designs
    assert d["valid"] and d["pipeline"]["self_judge"]["status"] == "no"
    (conv,) = backend.judge_convs
    assert "ModularChainEnv" in conv[1]["content"] and "Turn 1:" in conv[1]["content"]
    assert row["self_judge/judged"] == 1 and row["self_judge/no"] == 1
    assert row["reward/designer_mean"] == pytest.approx(row["reward/regret_mean"] - 0.5)


def test_a_retried_scaffolded_reply_is_prefilled_stopped_and_cut_like_the_first():
    from spade_train.core.design import build_designer_messages
    from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP
    from spade_train.steps.validate import generate_replies

    cfg = load_recipe("quickstart", [*SMALL, "designer.scaffold=true",
                                     "designer.hint_source=policy"])  # fmt: skip
    backend = Scripted([SOURCE + "\nif __name__ == '__main__':\n    print(1)\n"],
                       **cfg.backend.backend_kwargs(cfg.seed))  # fmt: skip
    conv = build_designer_messages("Math", compact=True, scaffold=True)
    texts, gens, _ = generate_replies(cfg, backend, [conv], seed=1)
    assert texts == [SCAFFOLD_PREFILL + SOURCE.rstrip() + "\n```"]
    assert gens[0].text.endswith("print(1)\n")  # the trained tokens are the policy's own
    plain = load_recipe("quickstart", SMALL)
    texts, _, _ = generate_replies(
        plain, Scripted([GOOD], **cfg.backend.backend_kwargs(0)), [conv], 1
    )
    assert texts == [GOOD] and SCAFFOLD_STOP[0] == "\n```"
