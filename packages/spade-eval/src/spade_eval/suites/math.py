"""Math: AIME-style integer answers and general answers checked for equivalence.

Data: ``$WORKSPACE_DIR/eval/math/<file>.jsonl``, one ``{"id", "problem", "answer"}`` per line.
Answers are read from the last ``\\boxed{}`` (else a final "Answer: ..." line); integer golds
compare as integers, others through math-verify with a sympy fallback.
"""

from __future__ import annotations

import json
import re
from typing import Any

from spade_envs import boxed_answer

from ..errors import EvalDataError
from . import DataNeed, Item, Score, suite_config, workspace_file, workspace_needs

DEFAULTS: dict[str, Any] = {"files": ["aime24.jsonl"], "samples": 1, "limit": None}
INSTRUCTION = "Solve the problem. Put your final answer in \\boxed{}."


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """The configured files under ``$WORKSPACE_DIR/eval/math/``."""
    cfg = suite_config(DEFAULTS, config, "math")
    return workspace_needs(
        "math",
        list(cfg["files"]),
        'write one {"id", "problem", "answer"} JSON object per line (see README)',
    )


def load(config: dict[str, Any]) -> list[Item]:
    """Items from the configured JSONL files (problem text + gold answer)."""
    cfg = suite_config(DEFAULTS, config, "math")
    items: list[Item] = []
    for name in cfg["files"]:
        path = workspace_file(
            "math", name, 'write one {"id", "problem", "answer"} JSON object per line (see README)'
        )
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                problem, answer = row["problem"], str(row["answer"])
            except (ValueError, KeyError, TypeError):
                raise EvalDataError(
                    f"{path}:{n}: needs a JSON object with problem, answer"
                ) from None
            item_id = f"{path.stem}/{row.get('id', n)}"
            prompt = [{"role": "user", "content": f"{problem}\n\n{INSTRUCTION}"}]
            items.append(Item(item_id, prompt, answer))
    return items[: cfg["limit"]] if cfg["limit"] else items


_ANSWER_LINE = re.compile(r"answer\s*(?:is|:)\s*\$?([^\n$]+)", re.IGNORECASE)


def extract_answer(text: str) -> str | None:
    """The final answer of a response: its boxed answer (:func:`spade_envs.boxed_answer`), else the last "answer: ..." phrase."""
    boxed = boxed_answer(text)
    if boxed is not None:
        return boxed
    found = _ANSWER_LINE.findall(text)
    return found[-1].strip().rstrip(".") if found else None


def _as_int(text: str) -> int | None:
    cleaned = text.replace(",", "").replace("$", "").strip()
    cleaned = re.sub(r"^\\text\{(.*)\}$", r"\1", cleaned)
    return int(cleaned) if re.fullmatch(r"[-+]?\d+", cleaned) else None


def equivalent(gold: str, pred: str) -> bool:
    """True when ``pred`` equals ``gold`` as an integer or as a math expression."""
    gold_int = _as_int(gold)
    if gold_int is not None:
        pred_int = _as_int(pred)
        if pred_int is not None:
            return pred_int == gold_int
    if gold.strip() == pred.strip():
        return True
    try:
        from math_verify import parse, verify

        # timeouts use signals, which work only in the main thread: off.
        g = parse(f"${gold}$", parsing_timeout=None)
        p = parse(f"${pred}$", parsing_timeout=None)
        if g and p and verify(g, p, timeout_seconds=None):
            return True
    except Exception:
        pass
    try:
        import sympy

        diff = sympy.simplify(sympy.sympify(gold) - sympy.sympify(pred))
        return diff == 0
    except Exception:
        return False


def score(item: Item, response: str) -> Score:
    """1.0 when the extracted answer is equivalent to the gold answer."""
    pred = extract_answer(response)
    if pred is None:
        return Score(0.0, None, "no answer found")
    return Score(1.0 if equivalent(str(item.answer), pred) else 0.0, pred)
