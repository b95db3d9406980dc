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
    yield from play_corpus(
        complete,
        cfg["corpus"] or se.example_corpus_path(),
        split=cfg["split"],
        episodes=int(cfg["episodes_per_game"]),
        seed=int(cfg["seed"]),
        done_ids=done_ids,
        prefix="game",
    )


def play_corpus(
    complete: Callable[..., list[str]],
    corpus_path: Any,
    *,
    split: str | None,
    episodes: int,
    seed: int,
    done_ids: set[str],
    prefix: str,
) -> Iterator[list[dict[str, Any]]]:
    """Episodes ``<prefix>/<env id>/<seed>`` of a corpus's ``split`` (all when None), sandboxed;
    the score is the episode return. Tool-use records' declared tools go with their episodes.
    A model or infrastructure fault is left unscored (so a rerun retries it) and raised after
    the scored records are yielded."""
    corpus = se.load_corpus(corpus_path)
    specs, ids = [], []
    for rec in corpus:
        if split and rec.split != split:
            continue
        factory = se.load_env(corpus.source(rec.id), rec.class_name, sandbox=True)
        tools = (rec.extra or {}).get("tools") if rec.skill == se.TOOL_USE else None
        for ep in range(episodes):
            episode_seed = seed * 1000 + ep
            item_id = f"{prefix}/{rec.id}/{episode_seed}"
            if item_id not in done_ids:
                specs.append(se.EpisodeSpec(factory, seed=episode_seed, env_id=rec.id,
                                            max_turns=rec.max_turns, tools=tools))  # fmt: skip
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
        raise ModelError(
            f"{len(faults)} episodes failed outside the environment; first: {faults[0]}"
        )
