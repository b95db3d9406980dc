"""Runtime checks of the tool-use setting, run by the pipeline when an environment uses tools.

For an environment whose ``skill`` is ``"ToolUse"`` (or that was made for it), after
``spade_envs.check_env`` passes:

1. the class's ``tools`` and ``domain`` are read inside the sandbox (a one-off script);
2. every tool spec must pass ``spade_envs.tool_schema_problems`` (valid JSON Schema of the
   subset tool parameters use);
3. every declared tool is probed with a schema-shaped valid call and with invalid ones (unknown
   tool, arguments not an object, wrong types, missing required, an undeclared argument when
   ``additionalProperties`` is false), each from a fresh ``reset(seed)``: no probe may raise or
   end the episode, and each invalid one must answer with an error observation;
4. replaying the probes under the same seed gives the same observations.

A failure raises ``spade_envs.ContractError`` with a code of :data:`TOOL_REASONS`; the
validation report carries it like any other reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import spade_envs as se
import spade_sandbox as ss

__all__ = ["TOOL_REASONS", "read_tools", "tool_probes", "check_tool_env"]

#: Reason codes of the tool-use checks, with what each means.
TOOL_REASONS: dict[str, str] = {
    "tools_missing": "a ToolUse environment has no non-empty class attribute 'tools'",
    "tools_unreadable": "the tools or domain attribute could not be read as JSON data",
    "domain_missing": "a ToolUse environment has no non-empty string attribute 'domain'",
    "tool_schema_invalid": "a tool spec is not a name, a description and a valid JSON Schema object",
    "tool_probe_raised": "a tool probe made step raise or return a bad value",
    "tool_probe_ended": "a tool call (valid or invalid) ended the episode",
    "tool_error_missing": "an invalid tool call was answered without an error observation",
    "tool_nondeterministic": "the same seed and tool calls gave different observations",
}

_READER = """
import json as _spade_json
print(_spade_json.dumps({{"tools": getattr({cls}, "tools", None), "domain": getattr({cls}, "domain", None)}}))
"""


def _fail(code: str, message: str, cause: BaseException | None = None) -> se.ContractError:
    err = se.ContractError(code, message)
    err.__cause__ = cause
    return err


def read_tools(source: str, class_name: str, config: ss.SandboxConfig) -> tuple[list[Any], Any]:
    """``(tools, domain)`` of the environment class, evaluated inside a fresh sandbox."""
    result = ss.run(source + "\n" + _READER.format(cls=class_name), config)
    if not result.ok:
        raise _fail(
            "tools_unreadable", f"reading {class_name}.tools failed: {result.stderr.strip()[-200:]}"
        )
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise _fail(
            "tools_unreadable",
            f"{class_name}.tools is not JSON data; use dicts, lists, strings and numbers",
        ) from None
    return data["tools"], data["domain"]


def _sample(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    return {"boolean": True, "array": [], "object": {}, "null": None}.get(kind, "a")


def _wrong(schema: dict[str, Any]) -> Any:
    kind = schema.get("type", "string")
    return (
        12345
        if kind == "string" or (isinstance(kind, list) and "string" in kind)
        else "not-a-number"
    )


def tool_probes(tools: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any], bool]]:
    """``(label, call, valid)`` probes for the declared tools (see the module docstring)."""
    probes: list[tuple[str, dict[str, Any], bool]] = [
        ("unknown tool", {"name": "__no_such_tool__", "arguments": {}}, False)
    ]
    for tool in tools:
        params = tool["parameters"]
        props = params.get("properties", {})
        required = params.get("required", [])
        name = tool["name"]
        good = {k: _sample(props[k]) for k in required}
        probes.append((f"{name} valid", {"name": name, "arguments": good}, True))
        probes.append(
            (f"{name} arguments not an object", {"name": name, "arguments": "oops"}, False)
        )
        if required:
            probes.append((f"{name} missing required", {"name": name, "arguments": {}}, False))
        for key in list(props)[:4]:
            if props[key].get("type") in (None, []):
                continue
            probes.append(
                (
                    f"{name} wrong type for {key}",
                    {"name": name, "arguments": {**good, key: _wrong(props[key])}},
                    False,
                )
            )
        if params.get("additionalProperties") is False:
            probes.append(
                (
                    f"{name} undeclared argument",
                    {"name": name, "arguments": {**good, "__probe__": 1}},
                    False,
                )
            )
    return probes


def _looks_like_error(observation: str) -> bool:
    text = observation.lower()
    return any(word in text for word in ("error", "invalid", "unknown", "missing", "must be"))


def _play_probes(
    factory: Any, seed: int, max_turns: int, probes: list[tuple[str, dict[str, Any], bool]]
) -> list[str]:
    env = factory(max_turns=max_turns)
    observations = []
    try:
        for label, call, valid in probes:
            where = f"seed={seed}, probe {label!r}"
            try:
                env.reset(seed=seed)
                result = env.step(json.dumps({"tool_calls": [call]}))
            except Exception as exc:
                raise _fail(
                    "tool_probe_raised",
                    f"{where} raised {type(exc).__name__}: {exc}; answer bad calls with an error observation",
                    exc,
                ) from exc
            try:
                se.check_step_result(result, where)
            except se.ContractError as exc:
                raise _fail("tool_probe_raised", f"{where}: {exc.message}") from exc
            obs, _, terminated, truncated, _ = result
            if terminated or (truncated and max_turns > 1):
                raise _fail(
                    "tool_probe_ended",
                    f"{where} ended the episode; a tool call is a step, only a final answer ends it",
                )
            if not valid and not _looks_like_error(obs):
                raise _fail(
                    "tool_error_missing",
                    f"{where} got {obs[:80]!r}; answer an invalid call with an 'error: ...' observation",
                )
            observations.append(obs)
    finally:
        try:
            env.close()
        except Exception:
            pass  # the probe outcome is what matters here
    return observations


def check_tool_env(
    source: str,
    class_name: str,
    factory: Any,
    *,
    config: ss.SandboxConfig,
    seeds: Sequence[int] = (0, 1),
    max_turns: int = se.DEFAULT_MAX_TURNS,
) -> dict[str, Any]:
    """Run the tool-use checks on an environment (``factory`` builds it, sandboxed or not).

    Returns what was measured (``tools``, ``domain``, ``tool_probes``); raises
    ``spade_envs.ContractError`` with a :data:`TOOL_REASONS` code on the first failure.
    """
    tools, domain = read_tools(source, class_name, config)
    if not isinstance(tools, list) or not tools:
        raise _fail(
            "tools_missing",
            f"{class_name} declares no tools; add a class attribute tools = [{{name, description, parameters}}, ...]",
        )
    if not isinstance(domain, str) or not domain.strip():
        raise _fail(
            "domain_missing",
            f"{class_name} has no domain; add a class attribute domain = 'calendar' (or another)",
        )
    problems = [p for tool in tools for p in se.tool_schema_problems(tool)]
    if problems:
        raise _fail("tool_schema_invalid", "; ".join(problems[:3]) + "; fix the tool's JSON Schema")
    probes = tool_probes(tools)
    seeds = tuple(seeds)[:2]
    first = _play_probes(factory, seeds[0], max_turns, probes)
    for seed in seeds[1:]:
        _play_probes(factory, seed, max_turns, probes)
    if _play_probes(factory, seeds[0], max_turns, probes) != first:
        raise _fail(
            "tool_nondeterministic",
            f"seed={seeds[0]}: the same tool calls gave different results; draw randomness only from random.Random(seed)",
        )
    return {
        "tools": [t["name"] for t in tools],
        "domain": domain,
        "tool_probes": len(probes) * (len(seeds) + 1),
    }
