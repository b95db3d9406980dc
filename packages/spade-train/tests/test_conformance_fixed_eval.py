"""Conformance with the released fixed-model difficulty evaluation (spade-rl/spade
``spade/core/eval/fixed_model_eval.py``, run every 16 batches by its Tinker launchers): the same
plays give the same metrics, and the loop runs it against a real OpenAI-compatible server.

Facts restated (in our words): a game's pass rate is wins / plays (a win: terminated with a
positive reward); pooled, variance p (1 - p) and difficulty score 1 - |p - 0.5| / 0.5; optimal
games have a pass rate in [0.3, 0.7]; reward statistics are the mean and population deviation
over games of each game's mean summed reward; the model sees only the current observation each
turn and its first ``\\boxed{x}`` (else ``\\boxed{{x}}``, else the whole reply) is sent boxed.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import spade_envs as se
from spade_train.config import load_recipe
from spade_train.core.fixed_eval import (
    FRAME,
    FrameAgent,
    GameResult,
    boxed_action,
    difficulty_metrics,
    play_games,
)
from spade_train.core.pool import PoolEntry
from spade_train.loop import start_run
from test_loop import ForcedDesigner, good_reply, small


def test_metrics_of_a_set_of_games() -> None:
    games = [
        GameResult("g1", "Math", 8, 4, (1.0,) * 4 + (0.0,) * 4),  # 0.5
        GameResult("g2", "Math", 8, 2, (1.0,) * 2 + (-1.0,) * 6),  # 0.25
        GameResult("g3", "Logic", 8, 8, (1.0,) * 8),  # 1.0
    ]
    m = difficulty_metrics(games)
    p = 14 / 24
    assert m["fixed_eval/overall_pass_rate"] == pytest.approx(p)
    assert m["fixed_eval/overall_variance"] == pytest.approx(p * (1 - p))
    assert m["fixed_eval/difficulty_score"] == pytest.approx(1 - abs(p - 0.5) / 0.5)
    assert m["fixed_eval/num_optimal_games"] == 1.0  # only g1 is within [0.3, 0.7]
    assert (m["fixed_eval/total_games"], m["fixed_eval/total_plays"]) == (3.0, 24.0)
    means = [0.5, -0.5, 1.0]
    avg = sum(means) / 3
    assert m["fixed_eval/avg_reward"] == pytest.approx(avg)
    assert m["fixed_eval/std_reward"] == pytest.approx(
        (sum((x - avg) ** 2 for x in means) / 3) ** 0.5
    )
    assert m["fixed_eval/skill_math/pass_rate"] == pytest.approx(6 / 16)
    assert m["fixed_eval/skill_math/num_games"] == 2.0
    assert m["fixed_eval/skill_logic/difficulty_score"] == 0.0
    assert m["fixed_eval/skill_logic/std_reward"] == 0.0  # one game: no spread
    empty = difficulty_metrics([])
    assert empty["fixed_eval/overall_pass_rate"] == 0.0 and empty["fixed_eval/total_games"] == 0.0


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("so it is \\boxed{ 42 } and \\boxed{43}", "\\boxed{42}"),
        ("\\boxed{{7}}", "\\boxed{7}"),
        ("move north", "\\boxed{move north}"),
    ],
)
def test_the_action_sent_for_a_reply(reply: str, action: str) -> None:
    assert boxed_action(reply) == action


GUESS = """
class GuessEnv:
    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.turns = 0
        return "Say the number %d." % self.target, {}

    def step(self, action):
        self.turns += 1
        if action.strip() == "\\\\boxed{%d}" % self.target:
            return "yes", 1.0, True, False, {}
        return "no, try again", 0.0, False, self.turns >= self.max_turns, {}

    def solution(self):
        return "\\\\boxed{%d}" % self.target

    def close(self):
        pass
"""


class _Answers:
    """A real OpenAI-compatible server on 127.0.0.1 that says 7 to every question."""

    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"auth": self.headers.get("Authorization"), **body})
                data = json.dumps({"choices": [{"message": {"content": "It is \\boxed{7}."}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _entry(env_id: str, target: int, skill: str) -> PoolEntry:
    source = GUESS.replace("self.turns = 0", f"self.turns = 0\n        self.target = {target}")
    return PoolEntry(env_id, source, "GuessEnv", None, skill, 3, 1, origin="designer")


def test_a_fixed_model_plays_each_game_from_the_observation_alone() -> None:
    server = _Answers()
    try:
        agent = FrameAgent(se.OpenAIChatAgent(server.url, "fixed-model", api_key="k"))
        games = play_games(
            [_entry("seven", 7, "Math"), _entry("three", 3, "Logic")],
            lambda e: se.load_env_class(e.source),
            agent,
            plays=2,
            max_turns=3,
            seed=0,
            cycle=1,
        )
    finally:
        server.close()
    assert [(g.env_id, g.plays, g.wins) for g in games] == [("seven", 2, 2), ("three", 2, 0)]
    assert games[1].rewards == (0.0, 0.0)
    # two wins in one turn each, two losses over all three turns: 2 + 2 * 3 requests
    assert len(server.requests) == 8
    for req in server.requests:  # one user message: the frame around the latest observation
        (msg,) = req["messages"]
        observation = re.search(r"Observation: (.*)\n", msg["content"]).group(1)
        assert msg["content"] == FRAME.format(observation=observation)
        assert req["model"] == "fixed-model" and req["auth"] == "Bearer k"
    assert {
        re.search(r"Observation: (.*)\n", r["messages"][0]["content"]).group(1)
        for r in server.requests
    } == {"Say the number 7.", "Say the number 3.", "no, try again"}
    m = difficulty_metrics(games)
    assert m["fixed_eval/overall_pass_rate"] == 0.5 and m["fixed_eval/difficulty_score"] == 1.0


@pytest.mark.parametrize("name", ["tinker-qwen3-8b", "tinker-gpt-oss-20b"])
def test_tinker_recipes_evaluate_with_gpt5_mini_every_16(name: str) -> None:
    f = load_recipe(name).eval.fixed_model
    assert (f.every, f.model, f.plays_per_game, f.temperature) == (16, "gpt-5-mini", 8, 0.7)
    assert (f.max_new_tokens, f.concurrency, f.api_key_env) == (16384, 128, "OPENAI_API_KEY")


def test_the_loop_evaluates_the_designer_rounds_environments(tmp_path, monkeypatch) -> None:
    server = _Answers()
    monkeypatch.setenv("FIXED_EVAL_TEST_KEY", "secret")
    evals = [
        "eval.fixed_model.every=2",
        f"eval.fixed_model.endpoint={server.url}",
        "eval.fixed_model.model=m",
        "eval.fixed_model.api_key_env=FIXED_EVAL_TEST_KEY",
        "eval.fixed_model.plays_per_game=1",
    ]
    cfg = small("quickstart", "cycles=2", "designer.regenerate_every=2", *evals)
    backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
    try:
        rows = start_run(cfg, tmp_path / "run", backend=backend, progress=False).train()
    finally:
        server.close()
    assert not any(k.startswith("fixed_eval/") for k in rows[0])  # every 2 cycles
    # the round of cycle 1 admitted one environment; the fixed model played it once
    assert rows[1]["fixed_eval/total_games"] == 1.0 and rows[1]["fixed_eval/total_plays"] == 1.0
    assert server.requests and all(r["auth"] == "Bearer secret" for r in server.requests)
    monkeypatch.delenv("FIXED_EVAL_TEST_KEY")
    skipped = small("quickstart", "cycles=1", "mode=spade", *evals[:1], "eval.fixed_model.every=1",
                    "eval.fixed_model.api_key_env=FIXED_EVAL_TEST_KEY")  # fmt: skip
    rows = start_run(skipped, tmp_path / "skip", progress=False).train()
    assert rows[0]["fixed_eval/skipped"] == 1.0
