"""Step 1 of a cycle: the designer prompt, and parsing the designer's reply into a source + hint.

The designer answers with one fenced Python block holding the whole module, then a line
``HINT: <one paragraph>``. Parsing is forgiving about chatter around the answer, fence flavours
(```python, ```py, ```python3, bare ```), several blocks (the one that defines a class ending in
``Env`` wins) and hint spellings (``HINT:``, ``Hint:``, ``<hint>...</hint>``), and strict about
everything the validator would reject anyway: every failure is a :class:`DesignParseError` with
a code from :data:`PARSE_REASON_CODES`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import spade_envs as se

from spade_train.core import skeleton as sk
from spade_train.core.scaffold import SCAFFOLD_PREFILL, pick_example
from spade_train.errors import SpadeTrainError
from spade_train.types import Message

PARSE_REASON_CODES: tuple[str, ...] = (
    "no_code_block",
    "unterminated_code_block",
    "syntax_error",
    "no_env_class",
    "multiple_env_classes",
    "missing_hint",
    "empty_hint",
    "too_long",
)

COMPACT_PROMPT_CHARS = 4500
"""Upper bound on a compact designer prompt (system + user), about 1200 tokens."""

DEFAULT_MAX_SOURCE_CHARS = 12000

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[ \t]*$", re.MULTILINE)
_CODE_LANGS = {"", "python", "py", "python3", "py3"}
_HINT_TAG = re.compile(r"<hint>(.*?)(?:</hint>|\Z)", re.DOTALL | re.IGNORECASE)
_HINT_LINE = re.compile(r"^[ \t*#>_-]*hint[ \t*_]*:[ \t*_]*(.*)$", re.IGNORECASE | re.MULTILINE)


class DesignParseError(SpadeTrainError, ValueError):
    """A designer reply that cannot become an environment. ``code`` is in PARSE_REASON_CODES;
    ``source`` is set when only the hint is missing (a separate hint pass may still help)."""

    def __init__(self, code: str, message: str, source: str | None = None) -> None:
        if code not in PARSE_REASON_CODES:
            raise ValueError(f"unknown parse reason code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.source = source

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message, self.source))


@dataclass
class Design:
    """A parsed designer reply: the module source, its ``*Env`` class, the hint, the skill
    (the class's ``skill = "..."`` attribute when it is a string literal)."""

    source: str
    class_name: str
    hint: str
    skill: str | None = None


# -- prompts -----------------------------------------------------------------------------------

_ANSWER_FORMAT = (
    "Answer format (exactly): one ```python fenced block with the full module, then one line\n"
    "HINT: <one paragraph: a strategy that helps with any episode, never a specific answer>"
)


def _clip(text: str, limit: int | None) -> str:
    text = text.strip()
    return (
        text
        if limit is None or len(text) <= limit
        else text[:limit].rsplit("\n", 1)[0].rstrip() + "\n..."
    )


def _memory_block(title: str, entries: Sequence[Any], excerpt_chars: int) -> str:
    parts = [title]
    for e in entries:
        head = f"- {e.env_id} ({e.skill}, agent win rate {e.win_rate:.2f}, regret {e.regret:+.2f})"
        body = _clip(e.code_excerpt, excerpt_chars) if excerpt_chars > 0 else ""
        parts.append(head + (f"\n```python\n{body}\n```" if body else ""))
    return "\n".join(parts)


def _document_block(text: str, setting: str, chars: int | None) -> str:
    """One reference document (uncut in a full prompt; clipped in a compact one)."""
    body = _clip(text, chars)
    if setting == "tool-use":
        use = (
            "You may take names, numbers or entities from this reference text for flavour; the "
            "domain above stays the task, and the task never mentions the text."
        )
    else:
        use = (
            "Base the game on a concept or technique this reference document describes: the "
            "player should have to apply it over several turns. The game's text must stand on "
            "its own and never mention the document."
        )
    return f"{use}\n<reference_document>\n{body}\n</reference_document>"


def _user_text(
    skill: str,
    setting: str,
    grounding: Sequence[str],
    memory: dict[str, list] | None,
    max_turns: int,
    snippet_chars: int | None,
    excerpt_chars: int,
    document: bool = False,
) -> str:
    target = "tool-use domain" if setting == "tool-use" else "skill"
    parts = [f"Target {target}: {skill}. The player gets at most {max_turns} turns."]
    if setting == "tool-use":
        parts.append(f'Set the class attribute skill = "{se.TOOL_USE}".')
    else:
        parts.append(f'Set the class attribute skill = "{skill}".')
    if grounding and document:
        parts.append(_document_block(grounding[0], setting, snippet_chars))
    elif grounding:
        snippets = "\n".join(f"<<<\n{_clip(s, snippet_chars)}\n>>>" for s in grounding if s.strip())
        parts.append(
            "Inspiration (text snippets between <<< and >>>; borrow a theme or idea, do not "
            "copy them):\n" + snippets
        )
    memory = memory or {}
    labels = (
        ("frontier", "Good difficulty (write something like these, but new):"),
        ("too_easy", "Too easy (the agent almost always wins; make yours harder):"),
        ("too_hard", "Too hard (the agent almost never wins; make yours easier):"),
    )
    for key, title in labels:
        if memory.get(key):
            parts.append(_memory_block(title, memory[key], excerpt_chars))
    parts.append(_ANSWER_FORMAT)
    return "\n\n".join(parts)


def build_designer_messages(
    skill: str,
    *,
    setting: str = "games",
    grounding: Sequence[str] = (),
    grounding_kind: str = "snippets",
    memory: dict[str, list] | None = None,
    max_turns: int = 6,
    compact: bool = False,
    scaffold: bool = False,
    example_index: int = 0,
    skeleton: bool = False,
) -> list[Message]:
    """The designer conversation for one prompt: the contract (plus the tool-use additions in
    that setting) as the system message; target skill, grounding snippets, memory examples
    (``frontier``/``too_easy``/``too_hard`` lists of ``spade_corpus.MemoryEntry``) and the answer
    format as the user message. ``compact=True`` keeps the whole prompt under
    :data:`COMPACT_PROMPT_CHARS` by shortening, then dropping, snippets and code excerpts.
    ``grounding_kind="document"``: ``grounding[0]`` is one reference document (already cut at
    its word budget), shown whole in a full prompt and clipped like a snippet in a compact one.

    ``scaffold=True`` (games setting, for policies too small to follow the format unaided)
    puts a short complete example game (``pick_example(skill, example_index)``: the starter
    corpus's training games of that skill in turn; not counted in the compact bound) after the
    user text and appends an assistant prefill, :data:`SCAFFOLD_PREFILL`:
    the policy continues the code block, generation stops at :data:`SCAFFOLD_STOP`, and the
    hint comes from the separate hint pass. ``skeleton=True`` (with ``scaffold``) prefills the
    reply further with :func:`spade_train.core.skeleton.prefix`: the policy writes only the
    hole of the template's ``reset()``."""
    document = grounding_kind == "document"
    if scaffold and setting == "tool-use":
        raise ValueError(
            "the scaffold example is a game; it is not offered in the tool-use setting"
        )
    system = "You design text games for training a reasoning agent.\n\n" + se.contract_text()
    if setting == "tool-use":
        system += "\n" + se.tool_contract_text()
    if not compact:
        chars = None if document else 1200  # a document is shown whole (cut at its words)
        user = _user_text(skill, setting, grounding, memory, max_turns, chars, 2000, document)
        return _finish(system, user, skill, scaffold, example_index, skeleton)
    grounding = list(grounding)
    mem = {k: list(v) for k, v in (memory or {}).items()}
    # Shrink step by step: shorter excerpts, then no code, then fewer examples and snippets.
    for snippet_chars, excerpt_chars in ((300, 300), (200, 120), (150, 0)):
        user = _user_text(
            skill, setting, grounding, mem, max_turns, snippet_chars, excerpt_chars, document
        )
        if len(system) + len(user) <= COMPACT_PROMPT_CHARS:
            break
    while len(system) + len(user) > COMPACT_PROMPT_CHARS and (grounding or any(mem.values())):
        longest = max(mem, key=lambda k: len(mem[k]), default=None)
        if longest is not None and mem[longest]:
            mem[longest].pop()
        else:
            grounding.pop()
        user = _user_text(skill, setting, grounding, mem, max_turns, 150, 0, document)
    return _finish(system, user, skill, scaffold, example_index, skeleton)


def _finish(
    system: str, user: str, skill: str, scaffold: bool, example_index: int, skeleton: bool
) -> list[Message]:
    if not scaffold:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    source, hint = pick_example(skill, example_index)
    example = (
        "\n\nWrite a new game of your own in the same form as this complete example game "
        f"(a different puzzle, not a copy):\n```python\n{source}```\nHINT: {hint}"
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user + example},
        {"role": "assistant", "content": SCAFFOLD_PREFILL + (sk.prefix(skill) if skeleton else "")},
    ]


def build_hint_messages(source: str, skill: str) -> list[Message]:
    """The conversation for the separate hint-writing pass over an environment's source."""
    return [
        {
            "role": "system",
            "content": "You write short strategy hints for text games played by a reasoning agent.",
        },
        {
            "role": "user",
            "content": (
                f"Here is a {skill} environment:\n```python\n{source.strip()}\n```\n\n"
                "Write one or two sentences that help a player solve ANY episode of it (a "
                "strategy or key insight), never the answer of a particular episode. Reply with "
                "one line: HINT: <hint>"
            ),
        },
    ]


# -- parsing -----------------------------------------------------------------------------------


def _code_blocks(text: str) -> tuple[list[tuple[str, int]], bool]:
    """Code blocks as ``(code, end offset)``, and whether a code fence was left open."""
    blocks: list[tuple[str, int]] = []
    fences = list(_FENCE.finditer(text))
    i = 0
    while i < len(fences):
        opening = fences[i]
        lang = opening.group(1).lower()
        closing = next((f for f in fences[i + 1 :] if not f.group(1)), None)
        if closing is None:
            return blocks, lang in _CODE_LANGS
        if lang in _CODE_LANGS:
            blocks.append((text[opening.end() : closing.start()].strip("\n"), closing.end()))
        i = fences.index(closing) + 1
    return blocks, False


def _env_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Env")]


def _skill_of(cls: ast.ClassDef) -> str | None:
    for node in cls.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "skill" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def _find_hint(text: str) -> str | None:
    """The hint after the code (tag first, then a ``HINT:`` line and its paragraph)."""
    tag = _HINT_TAG.search(text)
    if tag:
        return tag.group(1)
    matches = list(_HINT_LINE.finditer(text))
    if not matches:
        return None
    m = matches[0]
    rest = text[m.end() :].split("\n\n", 1)[0]
    paragraph = m.group(1) + ("\n" + rest.strip("\n") if rest.strip() else "")
    paragraph = paragraph.split("```", 1)[0]
    return paragraph


def _clean_hint(hint: str) -> str:
    return " ".join(hint.replace("**", "").split()).strip().strip('"').strip()


def parse_designer_output(text: str, max_source_chars: int = DEFAULT_MAX_SOURCE_CHARS) -> Design:
    """Parse a designer reply into a :class:`Design`; raise :class:`DesignParseError`."""
    blocks, unterminated = _code_blocks(text)
    if not blocks:
        if unterminated:
            raise DesignParseError(
                "unterminated_code_block", "the ```python block is never closed (reply cut off?)"
            )
        raise DesignParseError("no_code_block", "no ```python fenced code block in the reply")
    chosen: tuple[str, int, ast.Module] | None = None
    first_error: SyntaxError | None = None
    for code, end in blocks:
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            first_error = first_error or exc
            continue
        if _env_classes(tree):
            chosen = (code, end, tree)
            break
    if chosen is None:
        if first_error is not None:
            raise DesignParseError("syntax_error", f"line {first_error.lineno}: {first_error.msg}")
        raise DesignParseError("no_env_class", "no top-level class whose name ends in 'Env'")
    code, end, tree = chosen
    if len(code) > max_source_chars:
        raise DesignParseError(
            "too_long", f"source has {len(code)} characters, the limit is {max_source_chars}"
        )
    classes = _env_classes(tree)
    if len(classes) > 1:
        names = ", ".join(c.name for c in classes)
        raise DesignParseError("multiple_env_classes", f"several classes end in 'Env': {names}")
    source = code.rstrip() + "\n"
    hint = _find_hint(text[end:])
    if hint is None:
        hint = _find_hint(text[: text.find(code)])  # a hint written before the code
    if hint is None:
        raise DesignParseError("missing_hint", "no 'HINT: ...' line after the code", source)
    hint = _clean_hint(hint)
    if not hint:
        raise DesignParseError("empty_hint", "the HINT line is empty", source)
    return Design(source, classes[0].name, hint, _skill_of(classes[0]))


def parse_hint_output(text: str) -> str:
    """The hint from a hint-pass reply: a ``HINT:`` line or tag, else the whole reply."""
    found = _find_hint(text)
    hint = _clean_hint(found if found is not None else text.split("```", 1)[0])
    if not hint:
        raise DesignParseError("empty_hint", "the hint reply is empty")
    return hint
