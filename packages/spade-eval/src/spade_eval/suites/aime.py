"""AIME as released: ``${WORKSPACE_DIR}/aime-<year>/aime-<year>.jsonl``, one record per line
``{"prompt": [chat messages], "label": "<answer>"}`` (the prompt already carries the boxed
instruction; `prepare` adds it to a raw file).

Scored with the boxed answer of :func:`spade_envs.boxed_answer` (upstream reads the last box: see docs/differences.md), checked
against the label with math-verify (both wrapped in ``\\boxed{}``), else compared as integers.
Paper keys (`metrics`): ``aime<year>_pass1`` (mean over every sample = avg@k),
``aime<year>_pass_at_<k>`` (share of problems with any correct sample), ``aime<year>_n_problems``
and ``aime_overall_pass1`` (mean over years). Paper settings: 64 samples at temperature 1.0,
top_p 0.95, top_k 20 (``eval_configs/paper_games.yaml``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from spade_envs import boxed_answer

from ..errors import EvalDataError
from . import DataNeed, Item, Score, suite_config, workspace_root

DEFAULTS: dict[str, Any] = {"years": [2025, 2026], "path_template": None, "samples": 1,
                            "limit": None, "skip_missing": False}  # fmt: skip
INSTRUCTION = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def year_path(year: int, template: str | None) -> Path:
    """Where the records of ``year`` live."""
    if template:
        return Path(template.format(year=year))
    return workspace_root("aime") / f"aime-{year}" / f"aime-{year}.jsonl"


def _how(year: int, path: Path) -> str:
    return (f"put the released aime-{year}.jsonl there, e.g. "
            f"`spade-eval prepare-aime RAW.jsonl --out {path}`")  # fmt: skip


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """One file per configured year."""
    cfg = suite_config(DEFAULTS, config, "aime")
    if not cfg["path_template"] and not os.environ.get("WORKSPACE_DIR"):
        return [
            DataNeed("$WORKSPACE_DIR/aime-<year>/aime-<year>.jsonl", False, "set WORKSPACE_DIR")
        ]
    paths = [(y, year_path(int(y), cfg["path_template"])) for y in cfg["years"]]
    return [DataNeed(str(p), p.is_file(), _how(int(y), p)) for y, p in paths]


def load(config: dict[str, Any]) -> list[Item]:
    """Items ``aime-<year>/<index>``; a missing year is an error (skipped with
    ``skip_missing: true``, as upstream does)."""
    cfg = suite_config(DEFAULTS, config, "aime")
    items: list[Item] = []
    for year in cfg["years"]:
        path = year_path(int(year), cfg["path_template"])
        if not path.is_file():
            if cfg["skip_missing"]:
                continue
            raise EvalDataError(f"missing {path}; {_how(int(year), path)}")
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(line for line in lines if line.strip()):
            try:
                row = json.loads(line)
                prompt, label = list(row["prompt"]), str(row["label"])
            except (ValueError, KeyError, TypeError):
                raise EvalDataError(f"{path}: record {n + 1} needs prompt and label") from None
            items.append(Item(f"aime-{year}/{n}", prompt, label, {"year": int(year)}))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract(text: str) -> str | None:
    """The boxed answer (:func:`spade_envs.boxed_answer`, the project's one parser), or None."""
    return boxed_answer(text)


def verify(pred: str | None, label: str) -> bool:
    """math-verify on ``\\boxed{label}`` vs ``\\boxed{pred}``, else integer/string equality."""
    if pred is None:
        return False
    try:
        from math_verify import parse
        from math_verify import verify as mv_verify

        gold = parse(f"\\boxed{{{label}}}", parsing_timeout=None)
        got = parse(f"\\boxed{{{pred}}}", parsing_timeout=None)
        return bool(mv_verify(gold, got, timeout_seconds=None))
    except Exception:
        pass
    try:
        return int(pred.strip()) == int(label.strip())
    except ValueError:
        return pred.strip() == label.strip()


def score(item: Item, response: str) -> Score:
    """1.0 when the boxed answer verifies against the label."""
    pred = extract(response)
    return Score(1.0 if verify(pred, str(item.answer)) else 0.0, pred)


def metrics(by_item: dict[str, list[float]]) -> dict[str, float]:
    """Upstream's per-year keys and the overall pass@1 (see the module docstring)."""
    years: dict[str, list[list[float]]] = defaultdict(list)
    for item_id, scores in by_item.items():
        years[item_id.split("/", 1)[0].replace("-", "")].append(scores)
    out: dict[str, float] = {}
    for year, problems in sorted(years.items()):
        flat = [s for p in problems for s in p]
        k = min(len(p) for p in problems)
        out[f"{year}_pass1"] = sum(flat) / len(flat)
        out[f"{year}_pass_at_{k}"] = sum(any(s >= 1 for s in p) for p in problems) / len(problems)
        out[f"{year}_n_problems"] = float(len(problems))
    if years:
        out["aime_overall_pass1"] = sum(out[f"{y}_pass1"] for y in years) / len(years)
    return out


def prepare(raw: Path, out: Path) -> int:
    """Append the boxed instruction to every user message of ``raw`` and write the records to
    ``out`` atomically (upstream's ``prepare_aime_datasets.py`` step). Returns the count."""
    rows = []
    for n, line in enumerate(raw.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            for msg in row["prompt"]:
                if msg.get("role") == "user":
                    msg["content"] = msg.get("content", "") + INSTRUCTION
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EvalDataError(f"{raw}: record {n + 1} needs a prompt list of messages") from None
        rows.append(json.dumps(row, ensure_ascii=False))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, out)
    return len(rows)
