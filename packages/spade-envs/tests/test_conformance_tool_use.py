"""Conformance with the released SPADE tool-use code (spade-rl/spade
``spade/core/utils/tool_call_parser.py``, ``spade/core/envs/tool_use_base_env.py`` and the way
``spade/core/orchestrator.py`` plays a tool-use game): its inputs give its outputs here.

Facts restated (in our words):

* A ``<tool_call>`` block holds either JSON (Qwen2.5) or the XML form of Qwen3.5 / qwen3_coder,
  ``<function=NAME>`` with ``<parameter=KEY>VALUE</parameter>`` inside; the XML form is tried
  first; values are HTML-unescaped and stripped, then read as JSON when they are JSON.
* With an empty list of tools no call is parsed at all.
* A reply holding ``<answer>…</answer>`` is a submitted answer, read before any call.
* Environments subclass ``ToolUseBaseEnv`` without importing it (it is in their namespace); the
  subclass sets ``_tools``, ``_state`` and ``_expected_answer`` in ``reset`` and writes
  ``tool_<name>`` methods; a right answer is reward 1 and ends the episode, a wrong one is 0 and
  goes on (naming the pending step of a multi-step task), a reply that neither calls nor answers
  is -0.1; answers compare case-insensitively or as numbers within 0.01 (``$`` and ``,``
  dropped); an unknown tool or a raising tool is reported as the tool's result.
"""

from __future__ import annotations

import json

import pytest
import spade_envs as se

# An environment in the released code's style (its own base class, tools set in reset, a
# multi-step task revealed step by step, answers in <answer> tags), written for this test.
FILES_ENV = """
import random
import json
from typing import Tuple


class ArchiveReportEnv(ToolUseBaseEnv):
    def reset(self, seed=None) -> Tuple[str, dict]:
        self.turn_count = 0
        self._call_history = []
        if seed is not None:
            random.seed(seed)
        name = random.choice(["report.txt", "summary.txt"])
        self._state = {"cwd": "/home", "tree": {"/home": ["docs"], "/home/docs": [name]}}
        self._tools = {
            "cd": {"description": "Change directory",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                  "required": ["path"]}},
            "ls": {"description": "List the current directory",
                   "parameters": {"type": "object", "properties": {}}},
            "size": {"description": "Size of a file",
                     "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}},
        }
        self._user_messages = ["Go to /home/docs.", "List it and submit the file's name."]
        self._current_msg = 0
        self._expected_answer = name
        return ("TASK: " + self._user_messages[0] + " Submit with <answer>NAME</answer>.", {})

    def _advance(self):
        if self._current_msg == 0 and self._state["cwd"] == "/home/docs":
            self._current_msg = 1

    def tool_cd(self, path=""):
        if path not in self._state["tree"]:
            return "Error: no such directory " + path
        self._state["cwd"] = path
        self._advance()
        return "Now in " + path

    def tool_ls(self):
        return json.dumps(self._state["tree"][self._state["cwd"]])

    def tool_size(self, name=""):
        raise ValueError("sizes are not tracked")

    def solution(self) -> str:
        return "1. cd(path='/home/docs') 2. ls() 3. <answer>" + self._expected_answer + "</answer>"
"""

PRICE_ENV = """
class PriceEnv(ToolUseBaseEnv):
    def reset(self, seed=None):
        self._tools = {"quote": {"description": "The price", "parameters": {}}}
        self._expected_answer = "$1,234.50"
        return "What does it cost?", {}

    def tool_quote(self):
        return "1234.5 dollars"

    def solution(self):
        return "1234.5"
"""


def _xml(name: str, **params: object) -> str:
    inner = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{inner}</function>\n</tool_call>"


# -- the parser ---------------------------------------------------------------------------------


def test_xml_tool_calls_parse_with_json_values_and_unescaped_text() -> None:
    reply = "Let me look.\n" + _xml(
        "search", query="cats &amp; dogs", limit="5", exact="true", filters='{"lang": "en"}'
    )
    parsed = se.parse_tool_calls(reply)
    assert parsed.outcome == "tool_calls"
    (call,) = parsed.calls
    assert call.name == "search"
    assert call.arguments == {
        "query": "cats & dogs", "limit": 5, "exact": True, "filters": {"lang": "en"}
    }  # fmt: skip
    assert json.loads(se.canonical_action(parsed) or "") == {
        "tool_calls": [{"name": "search", "arguments": call.arguments}]
    }


def test_several_xml_blocks_run_in_order_and_a_block_with_no_parameters_is_empty() -> None:
    reply = _xml("cd", path="/home/docs") + "\n" + _xml("ls")
    parsed = se.parse_tool_calls(reply, [{"name": "cd"}, {"name": "ls"}])
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("cd", {"path": "/home/docs"}),
        ("ls", {}),
    ]


def test_json_tool_calls_still_parse() -> None:
    parsed = se.parse_tool_calls(
        '<tool_call>{"name": "ls", "arguments": {"path": "/"}}</tool_call>'
    )
    assert [(c.name, c.arguments) for c in parsed.calls] == [("ls", {"path": "/"})]


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "ls", "arguments": {}}</tool_call>',
        _xml("ls"),
        '{"name": "ls", "arguments": {}}',
    ],
)
def test_with_an_empty_tool_list_nothing_is_a_call(reply: str) -> None:
    assert se.parse_tool_calls(reply, []).outcome == "no_call"
    assert se.parse_tool_calls(reply, None).outcome == "tool_calls"  # None: tools unknown
    assert se.parse_tool_calls(reply + " \\boxed{7}", []).answer == "\\boxed{7}"


def test_an_answer_tag_is_read_before_any_call() -> None:
    parsed = se.parse_tool_calls(_xml("ls") + "\n<answer> report.txt </answer>")
    assert parsed.outcome == "final_answer" and parsed.answer == "\\boxed{report.txt}"
    assert se.canonical_action(parsed) == "\\boxed{report.txt}"


# -- ToolUseBaseEnv -----------------------------------------------------------------------------


def _cls(source: str) -> type:
    return se.load_env_class(se.compat_source(source))


def test_a_subclass_loads_without_importing_the_base_and_shows_its_tools() -> None:
    assert "ToolUseBaseEnv" in se.COMPAT_NAMES
    cls = _cls(FILES_ENV)
    assert [t["name"] for t in cls.tools] == ["cd", "ls", "size"]  # read on the class
    env = cls(max_turns=6)
    assert env.tools[0] == {
        "name": "cd",
        "description": "Change directory",
        "parameters": {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]
        },
    }  # fmt: skip
    assert env.get_tools()[1] == {"type": "function", "function": env.tools[1]}
    assert env.execute_tool("nope", {}) == {"output": "Unknown tool 'nope'", "returncode": 1}
    assert env.execute_tool("size", {"name": "x"}) == {
        "output": "Error calling size: sizes are not tracked",
        "returncode": 1,
    }
    assert env.execute_tool("ls", {}) == {"output": '["docs"]', "returncode": 0}
    assert env._call_history == [{"name": "ls", "arguments": {}, "result": '["docs"]'}]


def test_step_rewards_and_feedback() -> None:
    env = _cls(FILES_ENV)(max_turns=6)
    env.reset(seed=1)
    expected = env._expected_answer
    obs, reward, done, cut, _ = env.step("I am not sure.")
    assert (reward, done, cut) == (-0.1, False, False) and "Format error" in obs
    obs, reward, done, cut, _ = env.step("<answer>wrong.txt</answer>")
    assert (reward, done, cut) == (0.0, False, False)
    assert 'step 1 of 2 is still open: "Go to /home/docs."' in obs
    obs, reward, *_ = env.step(
        json.dumps({"tool_calls": [{"name": "cd", "arguments": {"path": "/home/docs"}}]})
    )
    assert (obs, reward) == ("Tool result:\nNow in /home/docs", 0.0)
    obs, *_ = env.step('<tool_call>{"name": "fly", "arguments": {}}</tool_call>')
    assert obs == "Unknown tool 'fly'. The tools are: cd, ls, size"
    obs, reward, done, cut, _ = env.step(f"<answer>{expected.upper()}</answer>")
    assert (obs, reward, done, cut) == ("Correct!", 1.0, True, False)


def test_the_last_turn_is_truncated_and_shows_the_solution() -> None:
    env = _cls(FILES_ENV)(max_turns=2)
    env.reset(seed=1)
    env.step(_xml("ls"))
    obs, reward, done, cut, _ = env.step("<answer>nothing</answer>")
    assert (reward, done, cut) == (0.0, False, True) and "Solution:" in obs


@pytest.mark.parametrize(
    ("answer", "right"),
    [("$1,234.50", True), ("1234.5", True), ("1234.505", True), ("1234.52", False), ("abc", False)],
)
def test_answers_compare_as_text_or_as_numbers_within_a_cent(answer: str, right: bool) -> None:
    env = _cls(PRICE_ENV)()
    assert env._check_answer(answer) is right


def test_a_released_style_environment_is_played_to_a_win_in_the_sandbox() -> None:
    pytest.importorskip("spade_sandbox")
    import spade_sandbox as ss

    source = se.compat_source(FILES_ENV)
    config = se.compat_sandbox_config(ss.SandboxConfig.from_env())
    local = _cls(FILES_ENV)(max_turns=6)
    tools = local.tools  # the training loop reads them in the sandbox (spade-corpus read_tools)
    local.reset(seed=11)
    name = local._expected_answer
    replies = [
        "I start in /home.\n" + _xml("cd", path="/home/docs"),
        _xml("ls"),
        f"The file is there.\n<answer>{name}</answer>",
    ]
    agent = se.ReplayAgent(replies)
    factory = se.SandboxedFactory(source, "ArchiveReportEnv", config=config)
    try:
        spec = se.EpisodeSpec(factory, seed=11, env_id="archive", max_turns=6, tools=tools)
        (result,) = se.run_episodes([spec], lambda chats: [agent(c) for c in chats])
    finally:
        factory.close()
    assert result.error is None and result.won and result.episode_return == 1.0
    assert [t.parse_outcome for t in result.turns] == ["tool_calls", "tool_calls", "final_answer"]
    assert result.turns[1].observation == f'Tool result:\n["{name}"]'
