"""Science: GPQA-style multiple choice with seeded option shuffling and robust letter extraction.

Data: ``$WORKSPACE_DIR/eval/science/<file>.jsonl``, one
``{"id", "question", "correct", "incorrect": [..]}`` per line.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from spade_envs import boxed_answer

from ..errors import EvalDataError
from . import DataNeed, Item, Score, suite_config, workspace_file, workspace_needs

DEFAULTS: dict[str, Any] = {
    "files": ["gpqa_diamond.jsonl"],
    "samples": 1,
    "limit": None,
    "seed": 0,
}
LETTERS = "ABCDEFGHIJ"


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """The configured files under ``$WORKSPACE_DIR/eval/science/``."""
    cfg = suite_config(DEFAULTS, config, "science")
    return workspace_needs(
        "science",
        list(cfg["files"]),
        'write one {"id", "question", "correct", "incorrect": [...]} JSON object per line',
    )


def load(config: dict[str, Any]) -> list[Item]:
    """Items with options shuffled by ``random.Random((seed, item id))``; answer is the letter."""
    cfg = suite_config(DEFAULTS, config, "science")
    items: list[Item] = []
    for name in cfg["files"]:
        path = workspace_file(
            "science",
            name,
            'write one {"id", "question", "correct", "incorrect": [...]} JSON object per line',
        )
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                options = [str(row["correct"])] + [str(x) for x in row["incorrect"]]
                question = str(row["question"])
            except (ValueError, KeyError, TypeError):
                raise EvalDataError(f"{path}:{n}: needs question, correct, incorrect") from None
            item_id = f"{path.stem}/{row.get('id', n)}"
            order = list(range(len(options)))
            random.Random(f"{cfg['seed']}:{item_id}").shuffle(order)
            letters = LETTERS[: len(options)]
            lines = [f"({letters[i]}) {options[j]}" for i, j in enumerate(order)]
            answer = letters[order.index(0)]
            content = (
                f"{question}\n\n" + "\n".join(lines) + "\n\nEnd your reply with 'Answer: X' "
                "where X is the letter of the correct option."
            )
            prompt = [{"role": "user", "content": content}]
            items.append(Item(item_id, prompt, answer, {"letters": letters}))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract_letter(text: str, letters: str = "ABCD") -> str | None:
    """The chosen option letter, by the first rule that matches (last match of that rule):
    "answer is / Answer: X", ``\\boxed{X}``, bold ``**X**``, ``(x)``, then the last lone capital."""
    cls = f"[{letters}{letters.lower()}]"
    rules: list[str | None] = [
        rf"answer\s*(?:is|:)?\s*(?:option\s*)?[:\s]*[(*\[]*\s*({cls})\b",
        None,
        rf"\*\*\s*\(?({cls})\)?[.:]?\s*\*\*",
        rf"\(({cls})\)",
        rf"\b([{letters}])\b",
    ]
    for rule in rules:
        if rule is None:  # the boxed answer, read by the project's one parser
            boxed = re.match(rf"\s*(?:\\text\{{)?({cls})\b", boxed_answer(text) or "")
            if boxed:
                return boxed.group(1).upper()
            continue
        found = re.findall(rule, text, flags=re.IGNORECASE if rule is rules[0] else 0)
        if found:
            return found[-1].upper()
    return None


def score(item: Item, response: str) -> Score:
    """1.0 when the extracted letter is the gold letter."""
    letter = extract_letter(response, item.meta.get("letters", "ABCD"))
    return Score(1.0 if letter == item.answer else 0.0, letter)


def metrics(by_item: dict[str, list[float]]) -> dict[str, float]:
    """``gpqa_diamond_avg_at_n`` (upstream's RQ1 key): mean over the GPQA-Diamond questions of
    each question's mean over its samples, when a ``gpqa_diamond*`` file was scored."""
    per = [sum(v) / len(v) for k, v in by_item.items() if k.startswith("gpqa_diamond")]
    return {"gpqa_diamond_avg_at_n": sum(per) / len(per)} if per else {}
