"""Reasoning-Gym hard split: the 100 dataset configurations of the reasoning-gym paper's
appendix A.3 that upstream evaluates as ``rg:<dataset>-hard``, grouped into four categories
(math, algorithmic, cognition, logic).

Items are generated offline by the installed ``reasoning-gym``: ``create_dataset(name,
size=episodes, seed=seed, **params)``, entries ``0..episodes-1`` (upstream draws 8 episodes per
task from a size-500 dataset seeded 42; here the draw is fixed by ``(seed, index)``). The prompt
is reasoning-gym's default instruction around ``Problem: <question>`` (the question ends with
upstream's boxed hint); the answer is the last ``<answer>…</answer>``, else the last
``\\boxed{}``, scored by the dataset's ``score_answer``. A win is a score of 1.
Paper keys: ``gem_eval/category_rg_<category>/win_rate`` (wins over episodes, pooled per
category), ``gem_eval/task_rg_<dataset>_hard/win_rate`` and ``gem_eval/overall_win_rate``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache
from importlib.resources import files
from typing import Any

from spade_envs import boxed_answer

from ..errors import EvalConfigError
from . import DataNeed, Item, Score, suite_config

DEFAULTS: dict[str, Any] = {"tasks": None, "episodes": 8, "seed": 42, "samples": 1, "limit": None}
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL | re.IGNORECASE)
BOXED_HINT = "\n\nPut your final answer within \\boxed{}."


@cache
def hard_split() -> dict[str, dict[str, Any]]:
    """``{dataset: {"category", "params"}}`` for the 100 tasks, in upstream's order."""
    text = files("spade_eval").joinpath("data/rg_hard.json").read_text(encoding="utf-8")
    data: dict[str, dict[str, Any]] = json.loads(text)
    return data


def category(name: str) -> str:
    """The category of a dataset of the split."""
    return str(hard_split()[name]["category"])


@cache
def _dataset(name: str, episodes: int, seed: int) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(
        name, size=episodes, seed=seed, **hard_split()[name]["params"]
    )


def prompt_text(question: str) -> str:
    """reasoning-gym's default instruction with the problem after its first line."""
    from reasoning_gym.utils import SYSTEM_PROMPTS

    first, rest = SYSTEM_PROMPTS["default"].split("\n", 1)
    return f"{first}\nProblem: {question}{BOXED_HINT}\n{rest.rstrip()}"


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """Nothing to download: the installed reasoning-gym generates every item."""
    return [DataNeed("reasoning-gym (installed package)", True, "uv sync")]


def load(config: dict[str, Any]) -> list[Item]:
    """Items ``<dataset>/<index>`` for the configured tasks (default: all 100)."""
    cfg = suite_config(DEFAULTS, config, "rg_hard")
    names = cfg["tasks"] or list(hard_split())
    unknown = [n for n in names if n not in hard_split()]
    if unknown:
        raise EvalConfigError(f"rg_hard: {unknown[0]!r} is not in the hard split")
    items = []
    for name in names:
        data = _dataset(name, int(cfg["episodes"]), int(cfg["seed"]))
        for i in range(len(data)):
            prompt = [{"role": "user", "content": prompt_text(data[i]["question"])}]
            meta = {"task": name, "index": i, "episodes": cfg["episodes"], "seed": cfg["seed"]}
            items.append(Item(f"{name}/{i}", prompt, data[i]["answer"], meta))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract(response: str) -> str | None:
    """The last ``<answer>`` payload, else the last boxed answer, else None."""
    found = _ANSWER.findall(response)
    return found[-1].strip() if found else boxed_answer(response)


def score(item: Item, response: str) -> Score:
    """1.0 for a win (the dataset's ``score_answer`` gives full credit), else 0.0."""
    meta = item.meta
    data = _dataset(meta["task"], int(meta["episodes"]), int(meta["seed"]))
    answer = extract(response)
    reward = float(data.score_answer(answer=answer, entry=data[meta["index"]]))
    return Score(1.0 if reward >= 1.0 - 1e-9 else 0.0, answer, f"reward={reward:g}")


def metrics(by_item: dict[str, list[float]]) -> dict[str, float]:
    """Win rates per category, per task and overall, pooled over episodes and samples."""
    wins: dict[str, list[float]] = defaultdict(list)
    for item_id, scores in by_item.items():
        task = item_id.split("/", 1)[0]
        wins[f"task_rg_{task}_hard"] += scores
        wins[f"category_rg_{category(task)}"] += scores
        wins["overall"] += scores
    out = {f"gem_eval/{k}/win_rate": sum(v) / len(v) for k, v in wins.items() if k != "overall"}
    if wins["overall"]:
        out["gem_eval/overall_win_rate"] = sum(wins["overall"]) / len(wins["overall"])
    return out
