"""The project's one boxed-answer parser: its rules, and a ratchet that fails when a second
parser of ``\\boxed{...}`` appears in a package's source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import spade_envs as se

ROOT = Path(__file__).resolve().parents[3]

#: Files allowed to read ``\boxed`` themselves, each with its reason.
ALLOWED = {
    # the owner
    "packages/spade-envs/src/spade_envs/actions.py": "boxed_answer itself",
    # splits a whole solution into its sequence of boxed actions: spans, not one answer
    "packages/spade-envs/src/spade_envs/compat.py": "solution() split into boxed actions",
    # environment-side code: played inside the sandbox, where spade_envs is not importable
    "packages/spade-envs/src/spade_envs/tool_base.py": "injected into sandboxed games",
    "packages/spade-train/src/spade_train/core/procedural.py": "game source run in the sandbox",
    "packages/spade-train/src/spade_train/core/scaffold.py": "game source run in the sandbox",
    "packages/spade-train/src/spade_train/core/skeleton.py": "the skeleton's game template",
}

#: A regex over ``\boxed{`` (``boxed\{``) or a scan for the text ``\boxed`` (find/rfind/index).
_PARSER = re.compile(r"boxed\\\\*\{|(?:r?find|index|split)\(\s*[\"'](?:\\\\)+boxed")


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # upstream's input/expected pairs (its game-utils parsing tests), in our test's words
        (r"answer: \boxed{42}", "42"),
        (r"answer: \boxed{{42}}", "42"),
        (r"answer: \boxed{{{x + 1}}}", "x + 1"),
        (r"answer: \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        ("no answer", None),
        ("", None),
        # our own cases of the same rules
        (r"\boxed{1} then \boxed{2}", "1"),  # the first simple box wins
        (r"\boxed{ 7 }", "7"),
        (r"\boxed{{7}} then \boxed{8}", "8"),  # a one-layer box before a two-layer one
        (r"a \boxed{1 and \boxed{2}", "2"),  # the unbalanced box is skipped
        (r"\boxed{\text{A}} or \boxed{\frac{a}{b}}", r"\frac{a}{b}"),  # nested: the last
        (r"\boxed{", None),
        (r"\boxed{}", ""),  # an empty box is an empty answer, not no answer
    ],
)
def test_boxed_answer_rules(text: str, expected: str | None) -> None:
    assert se.boxed_answer(text) == expected


def test_boxed_round_trips() -> None:
    assert se.boxed("42") == "\\boxed{42}"
    assert se.boxed_answer(se.boxed("x + 1")) == "x + 1"


def test_no_second_boxed_parser_in_package_sources() -> None:
    found = []
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED or rel.startswith("packages/spade-envs-corpora/"):
            continue  # shipped games are environment code, self-contained by contract
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PARSER.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "parse boxed answers with spade_envs.boxed_answer:\n" + "\n".join(found)


def test_the_ratchet_sees_a_parser() -> None:
    assert _PARSER.search(r'_B = re.compile(r"\\boxed\{(.+?)\}")')
    assert _PARSER.search('start = text.rfind("\\\\boxed{")')
    assert not _PARSER.search('INSTRUCTION = "Put your final answer in \\\\boxed{}."')
