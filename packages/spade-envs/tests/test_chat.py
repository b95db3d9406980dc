import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE


@pytest.mark.parametrize(
    "reply, action, source, malformed",
    [
        ("I think \\boxed{\\frac{1}{2}} is it", "\\boxed{\\frac{1}{2}}", "boxed", False),
        ("first \\boxed{1}, then \\boxed{2}", "\\boxed{1}", "boxed", False),
        ("<action>U</action> and \\boxed{3}", "U", "action_tag", False),
        ("<ACTION> a </ACTION><action>b</action>", "b", "action_tag", False),
        ("```\nmove L\n```", "move L", "fence", False),
        ("unbalanced \\boxed{1 and \\boxed{2}", "\\boxed{2}", "boxed", False),
        ("redundant \\boxed{{42}}", "\\boxed{42}", "boxed", False),
        ("no action here", "no action here", "none", True),
        ("", "", "none", True),
    ],
)
def test_parse_action(reply, action, source, malformed):
    parsed = se.parse_action(reply)
    assert (parsed.action, parsed.source, parsed.malformed) == (action, source, malformed)


def spec(factory, **kw):
    return se.EpisodeSpec(factory, seed=kw.pop("seed", 3), env_id="guess", **kw)


def binary_search_agent(messages):
    low, high = 1, 50
    for prev, nxt in zip(messages, messages[1:], strict=False):
        if prev["role"] == "assistant":
            guess = int(se.parse_action(prev["content"]).action[7:-1])
            if nxt["content"].startswith("Higher"):
                low = guess + 1
            elif nxt["content"].startswith("Lower"):
                high = guess - 1
    return f"Let me try the middle. \\boxed{{{(low + high) // 2}}}"


def test_messages_alternate_and_the_hint_is_appended_only_when_given(guess_factory):
    plain = se.run_episode(spec(guess_factory), binary_search_agent)
    hinted = se.run_episode(spec(guess_factory, hint=GUESS_HINT), binary_search_agent)
    assert plain.messages[0]["role"] == "system"
    assert [m["role"] for m in plain.messages[1:]] == ["user", "assistant"] * len(plain.turns) + [
        "user"
    ]
    assert "HINT:" not in plain.messages[1]["content"]
    assert hinted.messages[1]["content"].endswith(f"\n\nHINT: {GUESS_HINT}") and hinted.hinted
    assert plain.won and plain.episode_return == 1.0 and plain.terminated and len(plain.turns) <= 6
    assert [t.reward for t in plain.turns][-1] == 1.0 and all(
        t.reward == 0.0 for t in plain.turns[:-1]
    )


def test_malformed_replies_forward_or_reprompt(guess_factory):
    forward = se.run_episode(spec(guess_factory, max_turns=2), se.ReplayAgent(["hmm"]))
    assert [t.malformed for t in forward.turns] == [True, True]
    assert forward.turns[0].observation.startswith(
        "Write your guess"
    )  # the environment's own message
    reprompt = se.run_episode(
        spec(guess_factory, max_turns=2), se.ReplayAgent(["hmm"]), on_malformed="reprompt"
    )
    assert [t.observation for t in reprompt.turns] == [se.FORMAT_REMINDER] * 2
    assert reprompt.truncated and reprompt.episode_return == 0.0


def test_max_turns_truncates_even_if_the_environment_would_go_on(guess_factory):
    result = se.run_episode(
        spec(guess_factory, max_turns=3, env_kwargs={"max_turns": 100}),
        se.ReplayAgent(["\\boxed{0}"]),
    )
    assert len(result.turns) == 3 and result.truncated and not result.terminated
    assert result.episode_return == 0.0


def test_environment_and_agent_failures_end_only_their_episode(guess_factory):
    crashing = se.load_env(
        GUESS_SOURCE.replace("guess = int(found[-1])", "guess = int(found[-1]) // 0")
    )
    results = se.run_episodes(
        [spec(crashing), spec(guess_factory)], lambda batch: [binary_search_agent(m) for m in batch]
    )
    assert (
        results[0].error.boundary == "environment" and results[0].error.kind == "ZeroDivisionError"
    )
    assert results[0].episode_return == 0.0 and results[1].won and results[1].error is None

    def broken_agent(batch):
        raise ConnectionError("model server down")

    failed = se.run_episode(spec(guess_factory), lambda m: broken_agent([m])[0])
    assert failed.error.boundary == "agent" and "server down" in failed.error.message


def test_batched_episodes_call_the_agent_once_per_round(guess_factory):
    calls = []

    def agent(batch):
        calls.append(len(batch))
        return [binary_search_agent(m) for m in batch]

    progress = []
    results = se.run_episodes(
        [spec(guess_factory, seed=s) for s in range(6)],
        agent,
        on_turn=lambda d, t: progress.append((d, t)),
    )
    assert all(r.won for r in results)
    assert calls[0] == 6 and calls == sorted(calls, reverse=True) and len(calls) <= 6
    assert progress[-1] == (6, 6)


def _plain(results):
    return [(r.to_dict()["turns"], r.episode_return, r.error) for r in results]


def test_a_concurrency_window_bounds_batches_and_open_environments(guess_factory):
    state = {"open": 0, "peak": 0}
    lock = threading.Lock()

    class Counted:
        def __init__(self, **kw):
            self.env = guess_factory(**kw)
            with lock:
                state["open"] += 1
                state["peak"] = max(state["peak"], state["open"])

        def reset(self, seed=None):
            return self.env.reset(seed=seed)

        def step(self, action):
            return self.env.step(action)

        def close(self):
            with lock:
                state["open"] -= 1

    calls = []

    def agent(batch):
        calls.append(len(batch))
        return [se.RandomAgent(2)(m) for m in batch]

    specs = [spec(Counted, seed=s, max_turns=3 + s % 4) for s in range(11)]
    windowed = se.run_episodes(specs, agent, concurrency=3, workers=3)
    assert max(calls) == 3 and state["peak"] == 3 and state["open"] == 0
    everything = se.run_episodes(specs, lambda b: [se.RandomAgent(2)(m) for m in b])
    assert _plain(windowed) == _plain(everything)  # same episodes, in the order of specs
    assert [r.seed for r in windowed] == list(range(11))


def test_an_agent_failure_also_ends_the_episodes_not_yet_started(guess_factory):
    def agent(batch):
        raise RuntimeError("model crashed")

    results = se.run_episodes([spec(guess_factory, seed=s) for s in range(5)], agent, concurrency=2)
    assert len(results) == 5
    assert all(r.error.boundary == "agent" and "model crashed" in r.error.message for r in results)


@pytest.mark.parametrize("kw", [{"concurrency": 0}, {"workers": 0}])
def test_concurrency_and_workers_must_be_positive(guess_factory, kw):
    with pytest.raises(ValueError, match="at least 1"):
        se.run_episodes([spec(guess_factory)], binary_search_agent, **kw)


def test_scripted_agents_replay_deterministically(guess_factory):
    a = [se.run_episode(spec(guess_factory, seed=s), se.RandomAgent(1)) for s in range(5)]
    b = [se.run_episode(spec(guess_factory, seed=s), se.RandomAgent(1)) for s in range(5)]
    assert [r.to_dict()["turns"] for r in a] == [r.to_dict()["turns"] for r in b]
    replay = se.run_episode(spec(guess_factory), se.ReplayAgent(["\\boxed{1}", "\\boxed{2}"]))
    assert [t.action for t in replay.turns[:3]] == ["\\boxed{1}", "\\boxed{2}", "\\boxed{2}"]


def test_transcripts_are_json_with_per_turn_rewards(tmp_path, guess_factory):
    result = se.run_episode(spec(guess_factory, hint=GUESS_HINT), binary_search_agent)
    path = se.write_transcript(result, tmp_path / "t" / "episode.json")
    data = json.loads(path.read_text())
    assert data["hinted"] and data["episode_return"] == 1.0
    assert [t["reward"] for t in data["turns"]] == [t.reward for t in result.turns]
    assert [p.name for p in path.parent.iterdir()] == ["episode.json"]


class ScriptedServer:
    """A real HTTP server on 127.0.0.1 speaking the chat-completions API with injected faults."""

    def __init__(self, faults):
        self.faults = list(faults)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body, self.headers.get("Authorization")))
                fault = outer.faults.pop(0) if outer.faults else None
                if fault is not None:
                    self.send_response(fault)
                    self.end_headers()
                    self.wfile.write(b"injected")
                    return
                reply = binary_search_agent(body["messages"])
                data = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_agent_plays_through_a_local_server_and_retries_500s(guess_factory):
    server = ScriptedServer([500, 503])
    try:
        agent = se.OpenAIChatAgent(server.url, "tiny", api_key="", retries=3)
        results = se.run_episodes([spec(guess_factory, seed=s) for s in range(3)], agent.batch)
        assert all(r.won for r in results)
        assert (
            server.requests[0][0] == "/v1/chat/completions"
            and server.requests[0][1]["model"] == "tiny"
        )
        assert server.requests[0][2] == "Bearer EMPTY"  # no real key sent to a local server
        assert agent.endpoint.requests == len(server.requests)  # the two 500s were retried
    finally:
        server.close()


def test_openai_agent_gives_up_on_4xx_and_after_its_retries():
    server = ScriptedServer([400, 500, 500, 500])
    try:
        agent = se.OpenAIChatAgent(server.url, "tiny", api_key="", retries=2)
        with pytest.raises(se.EndpointError, match="completions: HTTP 400"):
            agent([{"role": "user", "content": "hi"}])
        with pytest.raises(se.EndpointError, match="failed after 3 attempts: HTTP 500"):
            agent([{"role": "user", "content": "hi"}])
    finally:
        server.close()


class _Halves:
    """An in-process environment with start_step that logs when steps are sent and collected."""

    def __init__(self, log, name, max_turns=10):
        self.log, self.name, self.turn = log, name, 0

    def reset(self, seed=None):
        self.log.append(("reset", self.name))
        return f"env {self.name}", {}

    def start_reset(self, seed=None):
        self.log.append(("send reset", self.name))
        return lambda: (self.log.append(("collect reset", self.name)), (f"env {self.name}", {}))[1]

    def step(self, action):
        self.log.append(("step", self.name))
        return self._result()

    def start_step(self, action):
        self.log.append(("send", self.name))
        return lambda: (self.log.append(("collect", self.name)), self._result())[1]

    def _result(self):
        self.turn += 1
        return f"turn {self.turn}", 0.25, self.turn >= 2, False, {}

    def solution(self):
        return ""

    def close(self):
        pass


class _Forwarding:
    """A wrapper that forwards unknown attributes (start_step, start_reset) to the one inside."""

    def __init__(self, inner):
        self.inner = inner

    def reset(self, seed=None):
        return self.inner.reset(seed)

    def step(self, action):
        obs, _, done, cut, info = self.inner.step(action)
        return obs, 1.0, done, cut, info  # its own step changes the reward

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_steps_that_can_be_collected_later_are_all_sent_first():
    log = []
    specs = [spec(lambda max_turns, n=n: _Halves(log, n)) for n in "abc"]
    results = se.run_episodes(specs, lambda b: ["\\boxed{1}"] * len(b), workers=4)
    assert [r.episode_return for r in results] == [0.25] * 3
    assert [len(r.turns) for r in results] == [2, 2, 2]
    events = [e for e, _ in log]
    assert events[:6] == ["send reset"] * 3 + ["collect reset"] * 3
    for start in (6, 12):  # per round: the three steps sent, then the three collected
        assert events[start : start + 6] == ["send"] * 3 + ["collect"] * 3


def test_a_forwarding_wrapper_is_stepped_through_its_own_step():
    log = []
    specs = [spec(lambda max_turns: _Forwarding(_Halves(log, "a")))]
    result = se.run_episodes(specs, lambda b: ["\\boxed{1}"] * len(b))[0]
    assert result.episode_return == 1.0 and {e for e, _ in log} == {"reset", "step"}
