"""Designer prompts carry the contract, skill, grounding and memory; replies parse robustly."""

from __future__ import annotations

import pickle

import pytest
import spade_corpus as sc
import spade_envs as se
from spade_train.core.design import (
    COMPACT_PROMPT_CHARS,
    PARSE_REASON_CODES,
    DesignParseError,
    build_designer_messages,
    build_hint_messages,
    parse_designer_output,
    parse_hint_output,
)
from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP, pick_example

SOURCE = """import random


class TinyEnv:
    skill = "Math"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        return "Say \\\\boxed{1}.", {}
"""


def _entry(i: int, win: float) -> sc.MemoryEntry:
    code = "\n".join(f"# line {j} of env {i} " + "x" * 40 for j in range(60))
    return sc.MemoryEntry(f"env{i}", "Math", sc.code_excerpt(code), win, 0.1 * i, 1, "h")


MEMORY = {
    "frontier": [_entry(1, 0.5), _entry(2, 0.45)],
    "too_easy": [_entry(3, 0.97)],
    "too_hard": [_entry(4, 0.02)],
}
GROUNDING = ["The knight moves in an L shape across the board. " * 20, "Tides follow the moon."]


def test_prompt_has_contract_skill_grounding_memory() -> None:
    msgs = build_designer_messages("Spatial", grounding=GROUNDING, memory=MEMORY, max_turns=5)
    assert [m["role"] for m in msgs] == ["system", "user"]
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert se.contract_text() in system
    assert "Target skill: Spatial" in user and 'skill = "Spatial"' in user and "5 turns" in user
    assert "knight moves" in user and "Tides follow the moon." in user and "<<<" in user
    assert "Good difficulty" in user and "env1" in user and "0.50" in user
    assert "Too easy" in user and "env3" in user and "0.97" in user
    assert "Too hard" in user and "env4" in user
    assert "HINT:" in user and "```python" in user


def test_tool_use_prompt_adds_tool_contract() -> None:
    msgs = build_designer_messages("banking", setting="tool-use")
    assert se.tool_contract_text().strip() in msgs[0]["content"]
    assert f'skill = "{se.TOOL_USE}"' in msgs[1]["content"] and "banking" in msgs[1]["content"]


def test_compact_prompt_is_bounded() -> None:
    full = build_designer_messages("Math", grounding=GROUNDING * 3, memory=MEMORY)
    compact = build_designer_messages("Math", grounding=GROUNDING * 3, memory=MEMORY, compact=True)
    size = sum(len(m["content"]) for m in compact)
    assert size <= COMPACT_PROMPT_CHARS < sum(len(m["content"]) for m in full)
    assert se.contract_text() in compact[0]["content"] and "Math" in compact[1]["content"]
    plain = build_designer_messages("Math", compact=True)
    assert sum(len(m["content"]) for m in plain) <= COMPACT_PROMPT_CHARS


def _ok(text: str, hint: str = "Work backwards from the goal.") -> None:
    d = parse_designer_output(text)
    assert d.class_name == "TinyEnv" and d.skill == "Math"
    assert d.source.strip() == SOURCE.strip()
    assert d.hint == hint


@pytest.mark.parametrize("fence", ["python", "py", "python3", "", "Python"])
def test_fence_flavours(fence: str) -> None:
    _ok(f"Sure! Here it is:\n```{fence}\n{SOURCE}```\nHINT: Work backwards from the goal.\n")


def test_chatter_several_blocks_and_hint_spellings() -> None:
    other = "```python\ndef helper():\n    return 1\n```\n"
    _ok(
        f"First a helper:\n{other}Now the env:\n```python\n{SOURCE}```\n"
        "Hint: Work backwards\nfrom the goal.\n\nHope this helps!"
    )
    _ok(f"```python\n{SOURCE}```\n<hint>Work backwards from the goal.</hint> bye")
    _ok(f"```python\n{SOURCE}```\n**HINT:** Work backwards from the goal.")
    _ok(f"```json\n{{}}\n```\n```python\n{SOURCE}```\nHINT: Work backwards from the goal.")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("I cannot do that.", "no_code_block"),
        ("```json\n{}\n```\nHINT: x", "no_code_block"),
        (f"```python\n{SOURCE}", "unterminated_code_block"),
        ("```python\nclass BadEnv(:\n    pass\n```\nHINT: x", "syntax_error"),
        ("```python\nclass Game:\n    pass\n```\nHINT: x", "no_env_class"),
        (
            "```python\nclass AEnv:\n    pass\nclass BEnv:\n    pass\n```\nHINT: x",
            "multiple_env_classes",
        ),
        (f"```python\n{SOURCE}```\nThat's all.", "missing_hint"),
        (f"```python\n{SOURCE}```\nHINT:   \n", "empty_hint"),
        ("```python\nclass LongEnv:\n" + "    x = 1\n" * 3000 + "```\nHINT: x", "too_long"),
    ],
)
def test_failures_have_codes(text: str, code: str) -> None:
    with pytest.raises(DesignParseError) as info:
        parse_designer_output(text)
    assert info.value.code == code and code in PARSE_REASON_CODES
    assert str(info.value).startswith(code)
    if code in ("missing_hint", "empty_hint"):
        assert info.value.source is not None and "class TinyEnv" in info.value.source
    again = pickle.loads(pickle.dumps(info.value))
    assert again.code == code


def test_hint_pass() -> None:
    msgs = build_hint_messages(SOURCE, "Math")
    assert "class TinyEnv" in msgs[-1]["content"] and "HINT:" in msgs[-1]["content"]
    assert parse_hint_output("Okay.\nHINT: Count parity first.") == "Count parity first."
    assert parse_hint_output("  Count parity first.  ") == "Count parity first."
    with pytest.raises(DesignParseError) as info:
        parse_hint_output("HINT:")
    assert info.value.code == "empty_hint"


def test_scaffold_prompt_shows_an_example_and_prefills_the_code_fence() -> None:
    msgs = build_designer_messages(
        "Logic", grounding=GROUNDING * 3, memory=MEMORY, compact=True, scaffold=True
    )
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
    assert msgs[-1]["content"] == SCAFFOLD_PREFILL
    example, hint = pick_example("Logic", 0)
    assert 'skill = "Logic"' in example and f"```python\n{example}```" in msgs[1]["content"]
    assert f"HINT: {hint}" in msgs[1]["content"]
    other = build_designer_messages("Logic", compact=True, scaffold=True, example_index=1)
    assert pick_example("Logic", 1)[0] in other[1]["content"] and example not in other[1]["content"]
    plain = build_designer_messages("Logic", grounding=GROUNDING * 3, memory=MEMORY, compact=True)
    assert msgs[1]["content"].startswith(plain[1]["content"])  # the compact bound is unchanged
    # the policy continues the prefill and stops at the closing fence: the code parses, and
    # the hint is left to the hint pass
    reply = SCAFFOLD_PREFILL + example.rstrip("\n") + SCAFFOLD_STOP[0]
    with pytest.raises(DesignParseError) as info:
        parse_designer_output(reply)
    assert info.value.code == "missing_hint" and info.value.source == example
    with pytest.raises(ValueError, match="tool-use"):
        build_designer_messages("calendar", setting="tool-use", scaffold=True)


@pytest.mark.parametrize("skill", se.SKILLS)
def test_every_scaffold_example_is_a_valid_environment_of_its_skill(skill: str) -> None:
    for index in range(2):
        source, hint = pick_example(skill, index)
        assert f'skill = "{skill}"' in source
        report = sc.validate_source(source, hint, skill=skill, max_turns=3, env_id="example")
        assert report.valid, report.message
