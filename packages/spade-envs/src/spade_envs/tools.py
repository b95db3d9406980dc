"""The tool-use setting: tool specs, call parsing, and the text rendering of tools.

A tool-use environment is a normal environment (see :mod:`spade_envs.core`) with
``skill = "ToolUse"``, a ``domain`` attribute and a class attribute ``tools``: a list of
``{"name", "description", "parameters"}`` where ``parameters`` is a JSON Schema object.

Canonical actions
-----------------
The chat runner parses the agent's reply with :func:`parse_tool_calls` and steps the environment
with one canonical action string:

* ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}`` (JSON) when the reply called
  tools; the observation is the tool results, sent back as a ``{"role": "tool"}`` message;
* ``\\boxed{final answer}`` when the reply gave a final answer and no call; the episode ends.

A reply that is neither is a parse failure with an outcome code from :data:`PARSE_OUTCOMES`;
the environment is not stepped, the observation explains the format, and the turn counts.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .actions import boxed, boxed_answer

__all__ = [
    "PARSE_OUTCOMES",
    "TOOL_CALL_FORMAT_TEXT",
    "ToolCall",
    "ToolCallParse",
    "parse_tool_calls",
    "canonical_action",
    "render_tools_text",
    "openai_tool_specs",
    "tool_schema_problems",
    "argument_problems",
    "tool_contract_text",
]

#: Outcome codes of :func:`parse_tool_calls`.
PARSE_OUTCOMES: dict[str, str] = {
    "tool_calls": "one or more well-formed calls",
    "final_answer": "a final answer in \\boxed{...} and no call",
    "no_call": "neither a call nor a final answer",
    "malformed_json": "a call block that is not valid JSON",
    "missing_name": "a call without a string 'name'",
    "unknown_tool": "a call to a tool the environment does not declare",
    "bad_arguments": "arguments that are not a JSON object (or a JSON string of one)",
}

TOOL_CALL_FORMAT_TEXT = (
    "To call a tool, write one block per call:\n"
    '<tool_call>{"name": "TOOL_NAME", "arguments": {"arg": "value"}}</tool_call>\n'
    "Several blocks in one reply run in order. Results come back in the next message. "
    "When you know the answer, reply with \\boxed{your final answer} and no tool call."
)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: a tool name and its arguments object."""

    name: str
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolCallParse:
    """What a reply contained. ``outcome`` is a key of :data:`PARSE_OUTCOMES`.

    ``calls`` are the well-formed calls (empty on failure), ``answer`` the ``\\boxed{...}``
    final answer (with its wrapper) when the outcome is ``final_answer``, ``error`` a one-line
    explanation on failure.
    """

    outcome: str
    calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    error: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome in ("tool_calls", "final_answer")


_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
# Qwen3.5 / qwen3_coder calls: <function=NAME><parameter=KEY>VALUE</parameter>...</function>
_XML_FUNCTION = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|$)", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([\w.\-]+)>(.*?)</parameter>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FENCE = re.compile(r"```(?:json|tool_call|python)?\s*\n?(.*?)```", re.DOTALL)
_PYCALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\((.*)\)\s*$", re.DOTALL)


def _json_objects(text: str) -> list[tuple[int, int]]:
    """Spans of top-level balanced ``{...}`` in ``text`` (strings respected)."""
    spans, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            esc = ch == "\\" and not esc
            if ch == '"' and not esc:
                in_str = False
            if ch != "\\":
                esc = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans


class _CallError(Exception):
    def __init__(self, outcome: str, message: str):
        super().__init__(message)
        self.outcome = outcome


def _to_call(obj: Any, names: set[str] | None) -> ToolCall:
    if isinstance(obj, Mapping) and isinstance(obj.get("function"), Mapping):
        obj = obj["function"]  # OpenAI {"type": "function", "function": {...}}
    if not isinstance(obj, Mapping):
        raise _CallError("bad_arguments", f"a call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise _CallError("missing_name", 'a call needs a string "name"')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise _CallError(
                "bad_arguments", f"arguments of {name!r} are a string but not JSON"
            ) from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _CallError(
            "bad_arguments", f"arguments of {name!r} must be an object, got {type(args).__name__}"
        )
    if names is not None and name not in names:
        raise _CallError(
            "unknown_tool", f"unknown tool {name!r}; the tools are {', '.join(sorted(names))}"
        )
    return ToolCall(name, args)


def _python_call(text: str, names: set[str] | None) -> ToolCall | None:
    match = _PYCALL.match(text)
    if not match or (names is not None and match.group(1) not in names):
        return None
    try:
        node = ast.parse(f"f({match.group(2)})", mode="eval").body
        if not isinstance(node, ast.Call) or node.args:
            return None
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (SyntaxError, ValueError):
        return None
    return ToolCall(match.group(1), args)


def _xml_call(block: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of a block in the XML form (its first function), or None. Each
    value is HTML-unescaped and stripped, then read as JSON when it is JSON (numbers, booleans,
    objects), else kept as text."""
    found = _XML_FUNCTION.search(block)
    if found is None:
        return None
    arguments: dict[str, Any] = {}
    for key, raw in _XML_PARAMETER.findall(found.group(2)):
        value: Any = html.unescape(raw.strip())
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            pass
        arguments[key] = value
    return found.group(1), arguments


def _parse_blocks(blocks: list[str], names: set[str] | None) -> list[ToolCall]:
    calls = []
    for block in blocks:
        xml = _xml_call(block)
        if xml is not None:
            calls.append(_to_call({"name": xml[0], "arguments": xml[1]}, names))
            continue
        try:
            obj = json.loads(block)
        except json.JSONDecodeError as exc:
            py = _python_call(block, names)
            if py is None:
                raise _CallError(
                    "malformed_json", f"a tool call is not valid JSON ({exc.msg} at char {exc.pos})"
                ) from None
            calls.append(py)
            continue
        for item in obj if isinstance(obj, list) else [obj]:
            calls.append(_to_call(item, names))
    return calls


def _looks_like_call(obj: Any) -> bool:
    if isinstance(obj, list):
        return bool(obj) and all(_looks_like_call(o) for o in obj)
    return (
        isinstance(obj, Mapping)
        and ("name" in obj or "function" in obj)
        and ("arguments" in obj or "parameters" in obj or "function" in obj)
    )


def parse_tool_calls(text: str, tools: Sequence[Mapping[str, Any]] | None = None) -> ToolCallParse:
    """Parse tool calls (or a final answer) from a model reply, tolerant of common formats.

    Accepted, in order of precedence: a submitted ``<answer>…</answer>`` (a final answer, read
    before any call, as upstream's runner does; returned as ``\\boxed{…}``);
    ``<tool_call>`` blocks holding JSON (Qwen/Hermes; a missing closing tag at the end is
    tolerated; a block may hold a JSON list of calls) or the XML form of Qwen3.5 / qwen3_coder
    (``<function=NAME><parameter=KEY>VALUE</parameter></function>``, values read as JSON when
    they are JSON, else as text);
    fenced JSON blocks; bare JSON objects ``{"name":…, "arguments":…}`` or
    ``{"function": {"name":…, "arguments":…}}`` anywhere in the text; a python-like call
    ``name(a=1, b="x")`` on its own line (only for declared tool names); the canonical action
    ``{"tool_calls": [...]}`` itself (so ``solution()`` lines replay as replies). Arguments may be a JSON
    string of an object. With ``tools``, names are checked (``unknown_tool``); with an empty
    list of tools nothing is read as a call (upstream). Without a call, a ``\\boxed{…}`` is
    the final answer. Never raises.
    """
    text = text if isinstance(text, str) else str(text)
    names = {t["name"] for t in tools} if tools else None
    answer = _ANSWER.search(text)
    if answer is not None:  # a submitted answer comes first, as upstream's runner reads it
        return ToolCallParse("final_answer", answer=f"\\boxed{{{answer.group(1).strip()}}}")
    if tools is not None and not tools:  # no tools offered: nothing is a call (upstream)
        return _final_or_nothing(text)
    try:
        blocks = _TAG.findall(text)
        if blocks:
            return ToolCallParse("tool_calls", tuple(_parse_blocks(blocks, names)))
        calls = _fenced_calls(text, names) or _object_calls(text, names)
        if not calls and names:
            for line in text.splitlines():
                py = _python_call(line.strip().strip("`"), names)
                if py is not None:
                    calls.append(py)
        if calls:
            return ToolCallParse("tool_calls", tuple(calls))
    except _CallError as exc:
        return ToolCallParse(exc.outcome, error=str(exc))
    return _final_or_nothing(text)


def _fenced_calls(text: str, names: set[str] | None) -> list[ToolCall]:
    """The calls written as JSON in fenced blocks."""
    calls: list[ToolCall] = []
    for block in (b for b in _FENCE.findall(text) if b.strip()):
        try:
            obj = json.loads(block)
        except json.JSONDecodeError:
            continue
        if _looks_like_call(obj):
            calls += _parse_blocks([block], names)
    return calls


def _object_calls(text: str, names: set[str] | None) -> list[ToolCall]:
    """The calls written as bare JSON objects anywhere in the text (and the canonical
    ``{"tool_calls": [...]}`` action)."""
    calls: list[ToolCall] = []
    for start, end in _json_objects(text):
        try:
            obj = json.loads(text[start:end])
        except json.JSONDecodeError:
            if re.match(r'\{\s*"(name|function)"', text[start:end]):
                raise _CallError("malformed_json", "a tool call object is not valid JSON") from None
            continue
        if isinstance(obj, Mapping) and isinstance(obj.get("tool_calls"), list):
            calls += [_to_call(item, names) for item in obj["tool_calls"]]  # canonical action
        elif _looks_like_call(obj):
            calls.append(_to_call(obj, names))
    return calls


def _final_or_nothing(text: str) -> ToolCallParse:
    answer = boxed_answer(text)
    if answer is not None:
        return ToolCallParse("final_answer", answer=boxed(answer))
    return ToolCallParse("no_call", error="no tool call and no \\boxed{...} final answer found")


def canonical_action(parsed: ToolCallParse) -> str | None:
    """The action string the runner steps the environment with (None for a failed parse)."""
    if parsed.outcome == "tool_calls":
        return json.dumps({"tool_calls": [c.to_dict() for c in parsed.calls]}, ensure_ascii=False)
    if parsed.outcome == "final_answer":
        return parsed.answer
    return None


def render_tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The documented text format of tools, for policies whose template has no ``tools=``."""
    lines = ["You can call these tools (JSON Schema parameters):"]
    for tool in tools:
        lines.append(
            json.dumps(
                {k: tool[k] for k in ("name", "description", "parameters") if k in tool},
                ensure_ascii=False,
            )
        )
    lines += ["", TOOL_CALL_FORMAT_TEXT]
    return "\n".join(lines)


def openai_tool_specs(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tools as OpenAI / Hugging Face chat-template specs: ``{"type": "function", "function": …}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("parameters", {"type": "object", "properties": {}}),
            },
        }
        for t in tools
    ]


_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
_KEYWORDS = {
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "description",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "additionalProperties",
    "default",
    "title",
    "pattern",
    "minItems",
    "maxItems",
    "format",
    "examples",
}


def _schema_problems(schema: Any, where: str) -> list[str]:
    if not isinstance(schema, Mapping):
        return [f"{where}: a schema must be an object"]
    out = [
        f"{where}: unsupported keyword {k!r}"
        for k in schema
        if k not in _KEYWORDS and not k.startswith("$")
    ]
    kinds = schema.get("type")
    kinds_list = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
    out += [f"{where}: unknown type {k!r}" for k in kinds_list if k not in _TYPES]
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            out.append(f"{where}: 'properties' must be an object")
        else:
            for name, sub in props.items():
                out += _schema_problems(sub, f"{where}.{name}")
    required = schema.get("required")
    if required is not None:
        if not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
            out.append(f"{where}: 'required' must be a list of strings")
        elif isinstance(props, Mapping):
            out += [
                f"{where}: required {r!r} is not in properties" for r in required if r not in props
            ]
    if "items" in schema:
        out += _schema_problems(schema["items"], f"{where}[]")
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        out.append(f"{where}: 'enum' must be a non-empty list")
    return out


def tool_schema_problems(tool: Any) -> list[str]:
    """Problems of one tool spec (empty when valid): name, description, an object schema.

    Checks the JSON Schema subset tool parameters use (type, properties, required, items, enum,
    bounds, lengths); with ``jsonschema`` importable the schema is also checked against the
    Draft 2020-12 meta-schema.
    """
    if not isinstance(tool, Mapping):
        return [f"a tool must be an object, got {type(tool).__name__}"]
    name = tool.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        return [f"tool name {name!r} must be an identifier (letters, digits, _)"]
    out = []
    if not isinstance(tool.get("description"), str) or not tool["description"].strip():
        out.append(f"{name}: missing description")
    params = tool.get("parameters")
    if not isinstance(params, Mapping) or params.get("type") != "object":
        return out + [f"{name}: parameters must be a JSON Schema with type 'object'"]
    out += _schema_problems(params, name)
    try:
        import jsonschema
    except ImportError:
        return out
    try:
        jsonschema.Draft202012Validator.check_schema(dict(params))
    except jsonschema.SchemaError as exc:
        out.append(f"{name}: not valid JSON Schema ({exc.message})")
    return out


_PY_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list, "null": type(None)}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return kind in _PY_TYPES and isinstance(value, _PY_TYPES[kind])


def argument_problems(schema: Mapping[str, Any], value: Any, where: str = "arguments") -> list[str]:
    """Why ``value`` does not satisfy ``schema`` (the subset :func:`tool_schema_problems` allows)."""
    kinds = schema.get("type")
    kinds_list = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    if kinds_list and not any(_type_ok(value, k) for k in kinds_list):
        return [f"{where} must be {'/'.join(kinds_list)}, got {type(value).__name__}"]
    out = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where} must be one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{where} must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{where} must be <= {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{where} is too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{where} is too long")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [
            f"{where}: missing required {r!r}" for r in schema.get("required", []) if r not in value
        ]
        for key, sub in value.items():
            if key in props:
                out += argument_problems(props[key], sub, f"{key}")
            elif schema.get("additionalProperties") is False:
                out.append(f"unknown argument {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            out += argument_problems(schema["items"], item, f"{where}[{i}]")
    return out


_TOOL_CONTRACT = """\
The tool-use setting. Write the environment as above, with these changes:

1. Class attributes: `skill = "ToolUse"`, `domain = "<calendar|inventory|banking|filesystem|database|units|...>"`,
   and `tools = [{"name": ..., "description": ..., "parameters": <JSON Schema object>}, ...]`
   (parameters: type "object" with "properties" and "required"; types string, integer,
   number, boolean, array, object; "enum" allowed).
2. The first observation states the task; the tools are shown to the agent separately.
3. `step(action)` receives either `{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}` (a
   JSON string) or `\\boxed{final answer}`. For tool calls, run each call and return the results
   as the observation (one line per call, e.g. `name -> result` or `name -> error: ...`), reward
   0.0, not terminated. Wrong argument types, missing required arguments or an unknown tool
   give an error line, never an exception. Any other action gets an observation explaining the
   format. A `\\boxed{}` answer ends the episode: reward 1.0 if correct, else 0.0.
4. The task must need several tool calls whose results decide later calls; guessing the final
   answer must not work. `solution()` returns the winning canonical actions, one per line.
"""


def tool_contract_text() -> str:
    """The tool-use additions to the environment contract, as designer prompt text."""
    return _TOOL_CONTRACT
