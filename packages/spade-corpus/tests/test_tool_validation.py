"""Tool-use validation: schemas, probes with valid and invalid calls, determinism, reason codes."""

from __future__ import annotations

import pytest
import spade_corpus as sc
import spade_envs as se

HINT = "Look the secret up with the tool first, then add the offset it reports before answering."

GOOD = """
import json
import random
import re


class VaultEnv:
    skill = "ToolUse"
    domain = "banking"
    tools = [{"name": "lookup", "description": "The value stored under a key.",
              "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                             "required": ["key"], "additionalProperties": False}}]

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.key = "k%d" % self.rng.randint(100, 999)
        self.value = self.rng.randint(10000, 99999)
        self.turn, self.done = 0, False
        return "Find the value stored under %s with the lookup tool; answer \\\\boxed{N}." % self.key, {}

    def _run(self, call):
        if not isinstance(call, dict) or call.get("name") != "lookup":
            return "error: unknown tool"
        args = call.get("arguments")
        if not isinstance(args, dict) or set(args) != {"key"} or not isinstance(args["key"], str):
            return "error: lookup takes one string argument key"
        return "lookup -> %s" % (self.value if args["key"] == self.key else "nothing")

    def step(self, action):
        if self.done:
            return "over", 0.0, True, False, {}
        self.turn += 1
        try:
            data = json.loads(action)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("tool_calls"), list):
            obs, reward, term = "\\n".join(self._run(c) for c in data["tool_calls"]) or "error: empty", 0.0, False
        else:
            found = re.findall(r"\\\\boxed\\{([^{}]*)\\}", action)
            if not found:
                obs, reward, term = "Call a tool or answer with \\\\boxed{N}.", 0.0, False
            else:
                ok = found[-1].strip() == str(self.value)
                obs, reward, term = ("right" if ok else "wrong"), float(ok), True
        trunc = not term and self.turn >= self.max_turns
        self.done = term or trunc
        return obs, reward, term, trunc, {}

    def solution(self):
        call = {"name": "lookup", "arguments": {"key": self.key}}
        return json.dumps({"tool_calls": [call]}) + "\\n\\\\boxed{%d}" % self.value

    def close(self):
        pass
"""


def _validate(source, skill="ToolUse"):
    return sc.validate_source(source, HINT, skill=skill, max_turns=8, seeds=(0, 1, 2))


def test_good_tool_env_passes_with_tool_checks():
    report = _validate(GOOD)
    assert report.valid, report.message
    assert report.checks["tools"] == ["lookup"] and report.checks["domain"] == "banking"
    assert report.checks["tool_probes"] > 0


BAD = {
    "tools_missing": ('    tools = [{"name": "lookup"', '    toolz = [{"name": "lookup"'),
    "domain_missing": ('    domain = "banking"', '    domain = ""'),
    "tool_schema_invalid": ('{"key": {"type": "string"}}', '{"key": {"type": "strng"}}'),
    "tool_probe_raised": (
        '            return "error: lookup takes one string argument key"',
        '            raise ValueError("bad arguments")',
    ),
    "tool_error_missing": (
        '            return "error: lookup takes one string argument key"',
        '            return "lookup -> nothing"',
    ),
    "tool_probe_ended": (
        'or "error: empty", 0.0, False',
        'or "error: empty", 0.0, "unknown" in "".join(self._run(c) for c in data["tool_calls"])',
    ),
    "tool_nondeterministic": (
        '"lookup -> %s" % (self.value',
        '"lookup -> %s %s" % (random.random(), self.value',
    ),
}


@pytest.mark.parametrize("reason", sorted(BAD))
def test_bad_tool_envs_get_reason_codes(reason):
    old, new = BAD[reason]
    assert old in GOOD
    report = _validate(GOOD.replace(old, new))
    assert not report.valid and report.reason == reason, (report.reason, report.message)
    assert (
        reason in sc.VALIDATION_REASONS and report.stage == "runtime" and not report.infrastructure
    )
    assert report.message and "\n" not in report.message


def test_tool_probes_cover_valid_and_invalid_calls():
    probes = sc.tool_probes(se.load_env(GOOD)().tools)
    labels = [label for label, _, _ in probes]
    assert "lookup valid" in labels and "unknown tool" in labels
    assert {
        "lookup missing required",
        "lookup wrong type for key",
        "lookup undeclared argument",
    } <= set(labels)
    assert sum(valid for *_, valid in probes) == 1


def test_game_envs_skip_tool_checks_and_shipped_tool_corpus_validates():
    game = se.load_corpus("example")
    rec = game.records[0]
    report = sc.validate_source(
        game.source(rec.id), rec.hint, skill=rec.skill, max_turns=rec.max_turns, seeds=(0, 1)
    )
    assert report.valid and "tools" not in report.checks
    corpus = se.load_corpus("tool_use")
    for env_id in ("inventory_purchase_order", "filesystem_archive_move"):
        r = corpus.record(env_id)
        report = sc.validate_source(
            corpus.source(env_id), r.hint, skill=r.skill, max_turns=r.max_turns, seeds=(0, 1)
        )
        assert report.valid, report.message
        assert report.checks["domain"] == r.extra["domain"]


def test_a_released_tool_use_subclass_shows_its_tools_in_the_sandbox():
    # upstream's tool-use games subclass ToolUseBaseEnv (in their namespace, not imported)
    # and set self._tools in reset; compat mode gives them the base, so the tools read from
    # the class inside the sandbox are the ones reset sets
    import spade_sandbox as ss

    source = se.compat_source(
        "class ClockEnv(ToolUseBaseEnv):\n"
        "    def reset(self, seed=None):\n"
        "        self._tools = {'now': {'description': 'The time', 'parameters':"
        " {'type': 'object', 'properties': {}}}}\n"
        "        self._expected_answer = '12:00'\n"
        "        return 'What time is it? Answer with <answer>HH:MM</answer>.', {}\n"
        "    def tool_now(self):\n"
        "        return '12:00'\n"
        "    def solution(self):\n"
        "        return '12:00'\n"
    )
    config = se.compat_sandbox_config(ss.SandboxConfig.from_env())
    tools, domain = sc.read_tools(source, "ClockEnv", config)
    assert tools == [
        {
            "name": "now",
            "description": "The time",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    assert domain is None
