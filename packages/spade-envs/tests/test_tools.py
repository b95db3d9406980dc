"""The tool-use contract: call parsing, schemas, text and chat-template rendering, the runner."""

from __future__ import annotations

import json

import jinja2
import pytest
import spade_envs as se

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
        },
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>',
            [("add", {"a": 1, "b": 2})],
        ),
        (
            'I will call.\n<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}\n</tool_call>',
            [("add", {"a": 3, "b": 4})],
        ),
        (
            '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            '{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 1}}}',
            [("add", {"a": 1, "b": 1})],
        ),
        (
            '```json\n{"name": "add", "arguments": {"a": 5, "b": 6}}\n```',
            [("add", {"a": 5, "b": 6})],
        ),
        ('get_weather(city="Rome", days=2)', [("get_weather", {"city": "Rome", "days": 2})]),
        (
            '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>',
            [("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Lima"})],
        ),
        (
            '<tool_call>[{"name": "add", "arguments": {"a": 0, "b": 0}}, {"name": "add", "arguments": {"a": 9, "b": 9}}]</tool_call>',
            [("add", {"a": 0, "b": 0}), ("add", {"a": 9, "b": 9})],
        ),
        ('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}', [("add", {"a": 2, "b": 2})]),
    ],
)
def test_parse_formats(text, expected):
    parsed = se.parse_tool_calls(text, TOOLS)
    assert parsed.outcome == "tool_calls" and parsed.ok
    assert [(c.name, c.arguments) for c in parsed.calls] == expected
    action = json.loads(se.canonical_action(parsed))
    assert action == {"tool_calls": [{"name": n, "arguments": a} for n, a in expected]}


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>', "malformed_json"),
        ("<tool_call>not json at all</tool_call>", "malformed_json"),
        ('{"name": "add", "arguments": {"a": 1, "b": }}', "malformed_json"),
        ('<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>', "unknown_tool"),
        ('<tool_call>{"arguments": {"a": 1}}</tool_call>', "missing_name"),
        ('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "add", "arguments": "a=1"}</tool_call>', "bad_arguments"),
        ("I think the weather is nice.", "no_call"),
    ],
)
def test_parse_failures_are_outcomes(text, outcome):
    parsed = se.parse_tool_calls(text, TOOLS)
    assert parsed.outcome == outcome and outcome in se.PARSE_OUTCOMES
    assert not parsed.ok and parsed.error and not parsed.calls
    assert se.canonical_action(parsed) is None


def test_final_answer_and_unknown_names_without_tools():
    parsed = se.parse_tool_calls("The answer is \\boxed{42}.", TOOLS)
    assert parsed.outcome == "final_answer" and se.canonical_action(parsed) == "\\boxed{42}"
    anything = se.parse_tool_calls('<tool_call>{"name": "zap", "arguments": {}}</tool_call>')
    assert anything.outcome == "tool_calls" and anything.calls[0].name == "zap"
    assert (
        se.parse_tool_calls("zap(x=1)").outcome == "no_call"
    )  # python-like only for declared names


def test_schema_problems_and_argument_checks():
    assert all(se.tool_schema_problems(t) == [] for t in TOOLS)
    bad = [
        {"name": "x y", "description": "d", "parameters": {"type": "object"}},
        {"name": "f", "description": "", "parameters": {"type": "object"}},
        {"name": "f", "description": "d", "parameters": {"type": "array"}},
        {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}},
        },
        {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {}, "required": ["a"]},
        },
        {"name": "f", "description": "d", "parameters": {"type": "object", "required": "a"}},
    ]
    for tool in bad:
        assert se.tool_schema_problems(tool), tool
    schema = TOOLS[0]["parameters"]
    assert se.argument_problems(schema, {"city": "Oslo", "days": 3}) == []
    assert se.argument_problems(schema, {"days": 3})  # missing required
    assert se.argument_problems(schema, {"city": 5})  # wrong type
    assert se.argument_problems(schema, {"city": "x", "days": 0})  # below minimum
    assert se.argument_problems(schema, {"city": "x", "days": True})  # bool is not an integer


def test_text_rendering_and_specs():
    text = se.render_tools_text(TOOLS)
    assert "get_weather" in text and '"required": ["city"]' in text and "<tool_call>" in text
    specs = se.openai_tool_specs(TOOLS)
    assert specs[1] == {"type": "function", "function": TOOLS[1]}
    assert "ToolUse" in se.tool_contract_text() and "tool_calls" in se.tool_contract_text()


# A small Qwen3-style template: tools in the system block, tool results as <tool_response>.
QWEN3_STYLE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags.<|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant') %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>
{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


class TemplateAgent:
    """Renders each chat with the Qwen3-style template the way a transformers backend would."""

    accepts_tools = True

    def __init__(self, replies):
        self.replies, self.prompts = replies, []
        self.env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        self.template = self.env.from_string(QWEN3_STYLE)

    def __call__(self, batch, tools):
        out = []
        for messages, specs in zip(batch, tools, strict=True):
            specs = se.openai_tool_specs(specs) if specs else None
            self.prompts.append(
                self.template.render(messages=messages, tools=specs, add_generation_prompt=True)
            )
            turn = sum(m["role"] == "assistant" for m in messages)
            out.append(self.replies[min(turn, len(self.replies) - 1)])
        return out


def _tool_env_factory():
    corpus = se.load_corpus(se.tool_use_corpus_path())
    rec = corpus.record("calendar_timezones")
    return corpus.factory(rec.id), rec


def test_runner_native_tools_render_in_qwen3_style_template():
    factory, rec = _tool_env_factory()
    env = factory(max_turns=rec.max_turns)
    env.reset(seed=3)
    plan = [line for line in env.solution().splitlines() if line.strip()]
    # the plan's calls as Hermes/Qwen <tool_call> blocks, then the final answer in prose
    replies = [
        "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in json.loads(line)["tool_calls"])
        for line in plan[:-1]
    ] + [f"Done. {plan[-1]}"]
    agent = TemplateAgent(replies)
    [result] = se.run_episodes(
        [se.EpisodeSpec(factory, seed=3, env_id=rec.id, max_turns=rec.max_turns)], agent
    )
    assert result.error is None and result.won and result.episode_return == 1.0
    assert result.tools == rec.extra["tools"]
    roles = [m["role"] for m in result.messages]
    assert roles[:2] == ["system", "user"] and roles.count("tool") == len(plan) - 1
    assert (
        result.messages[0]["content"] == se.TOOL_SYSTEM_PROMPT
    )  # native: tools not pasted as text
    first, last = agent.prompts[0], agent.prompts[-1]
    system_block = first.split("<|im_end|>")[0]
    assert "<tools>" in system_block and '"name": "utc_offset"' in system_block
    assert last.count("<tool_response>") == len(plan) - 1 and "get_meeting ->" in last
    assert last.endswith("<|im_start|>assistant\n")
    assert [t.parse_outcome for t in result.turns] == ["tool_calls"] * (len(plan) - 1) + [
        "final_answer"
    ]


def test_runner_text_tools_with_replay_agent_and_parse_failures():
    factory, rec = _tool_env_factory()
    env = factory(max_turns=rec.max_turns)
    env.reset(seed=5)
    plan = [line for line in env.solution().splitlines() if line.strip()]
    bad = [
        '<tool_call>{"name": "utc_offset", "arguments": {"city": }</tool_call>',
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
    ]
    agent = se.ReplayAgent(bad + plan)
    spec = se.EpisodeSpec(factory, seed=5, env_id=rec.id, max_turns=rec.max_turns)
    [result] = se.run_episodes([spec], lambda batch: [agent(m) for m in batch])
    assert result.won and len(result.turns) == len(plan) + 2
    assert (
        "<tool_call>" in result.messages[0]["content"]
        and "utc_offset" in result.messages[0]["content"]
    )
    assert [t.parse_outcome for t in result.turns[:2]] == ["malformed_json", "unknown_tool"]
    assert all(t.malformed and "error (" in t.observation for t in result.turns[:2])
    assert [m["role"] for m in result.messages[3:6:2]] == [
        "user",
        "user",
    ]  # failures answer as user turns
    assert result.turns[2].tool_calls and result.messages[7]["role"] == "tool"
    # the transcript round-trips as JSON with the new fields
    path = se.write_transcript(
        result, __import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "t.json"
    )
    assert json.loads(path.read_text())["turns"][0]["parse_outcome"] == "malformed_json"


def test_runner_truncates_tool_episodes_and_mixes_with_games():
    factory, rec = _tool_env_factory()
    game = se.load_corpus("example")
    gid = game.ids()[0]
    specs = [
        se.EpisodeSpec(factory, seed=1, env_id=rec.id, max_turns=3),
        se.EpisodeSpec(game.factory(gid), seed=1, env_id=gid, max_turns=3),
    ]
    seen = []

    class Spy:
        accepts_tools = True

        def __call__(self, batch, tools):
            seen.append(tools)
            return [
                '<tool_call>{"name": "utc_offset", "arguments": {"city": 7}}</tool_call>'
            ] * len(batch)

    tool_ep, game_ep = se.run_episodes(specs, Spy())
    assert tool_ep.truncated and not tool_ep.terminated and tool_ep.episode_return == 0.0
    assert (
        "must be string" in tool_ep.turns[0].observation
    )  # bad argument type: an error observation
    assert seen[0][0] == rec.extra["tools"] and seen[0][1] is None
    assert game_ep.tools is None and game_ep.messages[0]["content"] == se.DEFAULT_SYSTEM_PROMPT
    assert game_ep.turns[0].parse_outcome is None
