"""Tool use: BFCL-style function calling with AST-match scoring.

Data: a small hand-written set shipped as package data (``data/bfcl_style.json``: simple,
multiple, parallel); with ``bfcl_dir`` set (or ``$WORKSPACE_DIR/eval/bfcl/`` present) real BFCL
files are read: ``BFCL_v3_<category>.json`` (JSON lines with id, question, function) and
``possible_answer/BFCL_v3_<category>.json`` (id, ground_truth).

A ground truth is a list of ``{function_name: {arg: [allowed values]}}``; ``""`` among the
allowed values marks an optional argument. Calls are parsed from ``<tool_call>`` tags, JSON,
or Python call syntax ``f(a=1)``; parallel calls match in any order.

With ``environments: true`` the suite also plays the multi-turn tool-use environments of a
spade-envs corpus (``corpus``: default the shipped tool-use corpus; ``split``: default
``heldout``), ``episodes_per_env`` seeded episodes each, sandboxed, through
``spade_envs.run_episodes`` (tools shown in the documented text format, calls parsed by
``spade_envs.parse_tool_calls``); each scores its episode return, item ``env/<id>/<seed>``.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import spade_envs as se

from ..errors import EvalDataError
from . import Item, Score, suite_config
from .procedural import play_corpus

DEFAULTS: dict[str, Any] = {
    "categories": ["simple", "multiple", "parallel"],
    "bfcl_dir": None,
    "samples": 1,
    "limit": None,
    "environments": False,
    "corpus": None,
    "split": "heldout",
    "episodes_per_env": 2,
    "seed": 0,
}
SYSTEM = (
    "You can call these functions:\n{tools}\n\nAnswer only with the calls, each as "
    '<tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>.'
)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    except ValueError as exc:
        raise EvalDataError(f"{path}: not JSON lines ({exc})") from None


def _bfcl_rows(root: Path, category: str) -> list[dict[str, Any]]:
    q_path = root / f"BFCL_v3_{category}.json"
    a_path = root / "possible_answer" / f"BFCL_v3_{category}.json"
    for p in (q_path, a_path):
        if not p.is_file():
            raise EvalDataError(
                f"missing {p}; copy the BFCL v3 data files (and possible_answer/) into {root}"
            )
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(a_path)}
    rows = []
    for q in _jsonl(q_path):
        question = (
            q["question"][0]
            if q["question"] and isinstance(q["question"][0], list)
            else q["question"]
        )
        rows.append({"id": q["id"], "category": category, "question": question,
                     "function": q["function"], "ground_truth": answers.get(q["id"])})  # fmt: skip
    return rows


def load(config: dict[str, Any]) -> list[Item]:
    """Items from real BFCL files when configured or present, else the shipped set."""
    cfg = suite_config(DEFAULTS, config, "tool_use")
    root = cfg["bfcl_dir"]
    if root is None and os.environ.get("WORKSPACE_DIR"):
        candidate = Path(os.environ["WORKSPACE_DIR"]) / "eval" / "bfcl"
        root = candidate if candidate.is_dir() else None
    if root is not None:
        rows = [r for c in cfg["categories"] for r in _bfcl_rows(Path(root), c)]
    else:
        shipped = json.loads(files("spade_eval").joinpath("data/bfcl_style.json").read_text())
        rows = [r for r in shipped if r["category"] in cfg["categories"]]
    items = []
    for r in rows:
        if r["ground_truth"] is None:
            continue
        tools = "\n".join(json.dumps(f) for f in r["function"])
        prompt = [{"role": "system", "content": SYSTEM.format(tools=tools)}, *r["question"]]
        meta = {"functions": r["function"], "category": r["category"]}
        items.append(Item(r["id"], prompt, r["ground_truth"], meta))
    return items[: cfg["limit"]] if cfg["limit"] else items


def _call(obj: Any) -> tuple[str, dict[str, Any]] | None:
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return None
        return (obj["name"], args) if isinstance(args, dict) else None
    return None


def _python_calls(text: str) -> list[tuple[str, dict[str, Any]]] | None:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    nodes = tree.body.elts if isinstance(tree.body, (ast.List, ast.Tuple)) else [tree.body]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = ast.unparse(node.func)
        try:
            calls.append((name, {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}))
        except ValueError:
            return None
    return calls


def parse_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Function calls in a reply, as (name, arguments) pairs; [] when none parse."""
    tagged = re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
    if tagged:
        calls = []
        for block in tagged:
            try:
                call = _call(json.loads(block))
            except ValueError:
                call = None
            found = [call] if call else (_python_calls(block) or [])
            calls.extend(found)
        return calls
    body = text.strip()
    fence = re.search(r"```(?:json|python)?\s*\n(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1).strip()
    try:
        data = json.loads(body)
        data = data if isinstance(data, list) else [data]
        parsed = [_call(d) for d in data]
        calls = [c for c in parsed if c is not None]
        if calls and len(calls) == len(parsed):
            return calls
    except ValueError:
        pass
    return _python_calls(body) or []


def _norm(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        try:
            return float(s) if re.fullmatch(r"[-+]?\d+(\.\d+)?", s) else s.lower()
        except ValueError:
            return s.lower()
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def value_matches(value: Any, allowed: list[Any]) -> bool:
    """True when ``value`` equals one allowed value (numbers by value, strings case-insensitively)."""
    return any(_norm(value) == _norm(a) for a in allowed if a != "")


def call_matches(
    call: tuple[str, dict[str, Any]], truth: dict[str, dict[str, list[Any]]], required: list[str]
) -> bool:
    """One parsed call against one ground-truth ``{name: {arg: [allowed]}}``."""
    ((gt_name, gt_args),) = truth.items()
    name, args = call
    if name != gt_name:
        return False
    if any(r not in args for r in required) or any(a not in gt_args for a in args):
        return False
    for arg, allowed in gt_args.items():
        if arg not in args:
            if "" not in allowed:
                return False
        elif not value_matches(args[arg], allowed):
            return False
    return True


def _required(functions: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {f["name"]: list(f.get("parameters", {}).get("required", [])) for f in functions}


def score(item: Item, response: str) -> Score:
    """1.0 when the parsed calls match the ground truth one-to-one (any order)."""
    calls = parse_calls(response)
    extracted = json.dumps([{"name": n, "arguments": a} for n, a in calls])
    truth: list[dict[str, Any]] = item.answer
    if len(calls) != len(truth):
        return Score(0.0, extracted, f"{len(calls)} calls, expected {len(truth)}")
    required = _required(item.meta.get("functions", []))
    for perm in itertools.permutations(calls):
        if all(
            call_matches(c, t, required.get(next(iter(t)), []))
            for c, t in zip(perm, truth, strict=True)
        ):
            return Score(1.0, extracted)
    return Score(0.0, extracted, "calls do not match")


def play(
    complete: Callable[[list[list[dict]]], list[str]],
    config: dict[str, Any],
    done_ids: set[str],
) -> Iterator[list[dict[str, Any]]]:
    """With ``environments`` on: the corpus's tool-use environments not in ``done_ids``."""
    cfg = suite_config(DEFAULTS, config, "tool_use")
    if not cfg["environments"]:
        return
    yield from play_corpus(
        complete,
        cfg["corpus"] or se.tool_use_corpus_path(),
        split=cfg["split"],
        episodes=int(cfg["episodes_per_env"]),
        seed=int(cfg["seed"]),
        done_ids=done_ids,
        prefix="env",
    )
