"""Procedural reasoning: seeded reasoning-gym tasks scored by each dataset's ``score_answer``,
and the held-out games of a spade-envs corpus played through ``spade_envs.run_episodes``.

Both are offline. The corpus defaults to ``spade_envs.example_corpus_path()``; set ``corpus``
to any corpus path (for example the tool-use corpus) and ``split`` to pick its games.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import spade_envs as se

from ..errors import ModelError
from . import Item, Score, suite_config

DEFAULTS: dict[str, Any] = {
    "tasks": ["basic_arithmetic", "chain_sum", "letter_counting"],
    "size": 10,
    "seed": 0,
    "samples": 1,
    "limit": None,
    "games": True,
    "corpus": None,
    "split": "heldout",
    "episodes_per_game": 2,
}
INSTRUCTION = "Give your final answer after 'Answer:' on the last line."
_DATASETS: dict[tuple[str, int, int], Any] = {}


def _dataset(name: str, size: int, seed: int) -> Any:
    key = (name, size, seed)
    if key not in _DATASETS:
        import reasoning_gym

        _DATASETS[key] = reasoning_gym.create_dataset(name, size=size, seed=seed)
    return _DATASETS[key]


def load(config: dict[str, Any]) -> list[Item]:
    """reasoning-gym items ``<task>/<index>`` generated from ``(seed, size)``."""
    cfg = suite_config(DEFAULTS, config, "procedural")
    items = []
    for task in cfg["tasks"]:
        data = _dataset(task, int(cfg["size"]), int(cfg["seed"]))
        for i in range(len(data)):
            entry = data[i]
            prompt = [{"role": "user", "content": f"{entry['question']}\n\n{INSTRUCTION}"}]
            meta = {"task": task, "index": i, "size": cfg["size"], "seed": cfg["seed"]}
            items.append(Item(f"{task}/{i}", prompt, entry["answer"], meta))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract_answer(response: str) -> str:
    """Text after the last 'Answer:' (or the last non-empty line)."""
    low = response.lower()
    at = low.rfind("answer:")
    if at != -1:
        return response[at + len("answer:") :].strip()
    lines = [line.strip() for line in response.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def score(item: Item, response: str) -> Score:
    """The dataset's own ``score_answer`` for this entry."""
    data = _dataset(item.meta["task"], int(item.meta["size"]), int(item.meta["seed"]))
    answer = extract_answer(response)
    value = float(data.score_answer(answer=answer, entry=data[item.meta["index"]]))
    return Score(value, answer)


def play(
    complete: Callable[[list[list[dict]]], list[str]],
    config: dict[str, Any],
    done_ids: set[str],
) -> Iterator[list[dict[str, Any]]]:
    """Play the corpus games not in ``done_ids``; yields one batch of records (dicts)."""
    cfg = suite_config(DEFAULTS, config, "procedural")
    if not cfg["games"]:
        return
    corpus = se.load_corpus(cfg["corpus"] or se.example_corpus_path())
    specs, ids = [], []
    for rec in corpus:
        if cfg["split"] and rec.split != cfg["split"]:
            continue
        factory = se.load_env(corpus.source(rec.id), rec.class_name, sandbox=True)
        for ep in range(int(cfg["episodes_per_game"])):
            seed = int(cfg["seed"]) * 1000 + ep
            item_id = f"game/{rec.id}/{seed}"
            if item_id not in done_ids:
                spec = se.EpisodeSpec(factory, seed=seed, env_id=rec.id, max_turns=rec.max_turns)
                specs.append(spec)
                ids.append(item_id)
    if not specs:
        return
    results = se.run_episodes(specs, complete)
    records, faults = [], []
    for item_id, res in zip(ids, results, strict=True):
        if res.error and res.error.boundary in ("agent", "infrastructure"):
            # a model or infrastructure fault is not the game's score: left unscored for a rerun
            faults.append(f"{item_id}: {res.error.boundary}: {res.error.message[:200]}")
            continue
        error = f"{res.error.boundary}: {res.error.message}" if res.error else ""
        records.append(
            {
                "item_id": item_id,
                "prompt": res.messages[:2],
                "response": res.messages[-1]["content"] if res.messages else "",
                "extracted": None,
                "score": float(res.episode_return),
                "detail": error,
            }
        )
    yield records
    if faults:
        raise ModelError(f"{len(faults)} game episodes failed outside the game; first: {faults[0]}")
