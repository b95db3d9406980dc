"""The evaluation loop: load items, ask the model for what is not yet scored, score, store."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from .errors import EvalConfigError, SuiteSkipped
from .metrics import mean_stderr, pass_at_k
from .models import ModelClient
from .store import RecordStore, write_json_atomic
from .suites import get_suite, suite_names

TOP_KEYS = {"seed", "batch_size", "sampling", "suites"}


def load_config(name_or_path: str | os.PathLike[str] = "default") -> dict[str, Any]:
    """A YAML config: a path, or the name of a shipped one (default, quick, full)."""
    path = Path(name_or_path)
    if not path.suffix:
        shipped = files("spade_eval").joinpath(f"eval_configs/{name_or_path}.yaml")
        if not shipped.is_file():
            raise EvalConfigError(
                f"no shipped config {str(name_or_path)!r}; use default, quick, full, paper or inloop"
            )
        text = shipped.read_text()
    elif not path.is_file():
        raise EvalConfigError(f"config file {path} does not exist")
    else:
        text = path.read_text(encoding="utf-8")
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise EvalConfigError(
            f"{name_or_path}: not valid YAML ({exc})".replace("\n", " ")
        ) from None
    return check_config(config)


def check_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the top level of a config; unknown keys and suites are refused by name."""
    if not isinstance(config, dict):
        raise EvalConfigError("a config must be a mapping with suites, sampling, seed, batch_size")
    unknown = sorted(set(config) - TOP_KEYS)
    if unknown:
        raise EvalConfigError(
            f"unknown config key {unknown[0]!r}; known: {', '.join(sorted(TOP_KEYS))}"
        )
    for name in config.get("suites") or {}:
        _known_suite(name)
    return config


def _known_suite(name: str) -> None:
    """A suite name the user gave: one line naming the known ones when it is not one."""
    if name not in suite_names():
        raise EvalConfigError(f"unknown suite {name!r}; choose from {', '.join(suite_names())}")


def summarize(
    store: RecordStore, suites: list[str], model: str, out_dir: Path | None = None
) -> dict[str, Any]:
    """Per suite: mean and stderr over items (each item's mean over samples), n, pass@k; when a
    suite mixes kinds of items, ``parts``: mean and n per item-id prefix (``env``, ``game``, …).
    ``metrics``: the flat paper keys of the suites that define ``metrics(by_item)``."""
    out: dict[str, Any] = {"model": model, "suites": {}, "metrics": {}}
    for suite in suites:
        by_item: dict[str, list[float]] = defaultdict(list)
        for rec in store.suite_records(suite):
            by_item[rec["item_id"]].append(float(rec["score"]))
        if not by_item:
            continue
        mean, stderr = mean_stderr([sum(v) / len(v) for v in by_item.values()])
        k_max = min(len(v) for v in by_item.values())
        entry: dict[str, Any] = {
            "mean": mean,
            "stderr": stderr,
            "n": len(by_item),
            "samples": k_max,
        }
        entry[f"avg@{k_max}"] = mean
        k = 1
        while k <= k_max:
            vals = [pass_at_k(len(v), sum(s >= 1.0 for s in v), k) for v in by_item.values()]
            entry[f"pass@{k}"] = sum(vals) / len(vals)
            k *= 2
        parts: dict[str, list[float]] = defaultdict(list)  # "env/…", "game/…", "<task>/…"
        for item_id, v in by_item.items():
            parts[item_id.split("/", 1)[0] if "/" in item_id else "items"].append(sum(v) / len(v))
        if len(parts) > 1:
            entry["parts"] = {
                name: {"mean": sum(v) / len(v), "n": len(v)} for name, v in sorted(parts.items())
            }
        out["suites"][suite] = entry
        paper_keys = getattr(get_suite(suite), "metrics", None)
        if paper_keys is not None:
            out["metrics"].update(paper_keys(dict(by_item)))
        external = out_dir / suite / "metrics.json" if out_dir else None
        if external is not None and external.is_file():
            out["metrics"].update(json.loads(external.read_text(encoding="utf-8")))
    return out


def evaluate(
    client: ModelClient,
    config: dict[str, Any] | str,
    out_dir: str | os.PathLike[str],
    *,
    suites: list[str] | None = None,
    limit: int | None = None,
    samples: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Score ``client`` on the config's suites; resumes from ``out_dir/records.jsonl``.

    Returns the summary also written atomically to ``out_dir/results.json``.
    """
    config = load_config(config) if isinstance(config, str) else check_config(config)
    suite_cfgs: dict[str, dict[str, Any]] = dict(config.get("suites") or {})
    names = suites or list(suite_cfgs)
    if not names:
        raise EvalConfigError("no suites to run; name them in the config or with --suites")
    for name in names:  # before any suite runs
        _known_suite(name)
    sampling = dict(config.get("sampling") or {"temperature": 0.0, "max_tokens": 1024})
    seed = int(config.get("seed", 0))
    batch_size = int(config.get("batch_size", 64))
    store = RecordStore(out_dir)
    skipped: dict[str, str] = {}
    for name in names:
        suite = get_suite(name)
        cfg = dict(suite_cfgs.get(name) or {})
        suite_sampling = {**sampling, **(cfg.pop("sampling", None) or {})}
        if limit is not None:
            cfg["limit"] = limit
        if samples is not None:
            cfg["samples"] = samples
        if hasattr(suite, "run_external"):
            reason = run_external(suite, name, client, cfg, suite_sampling, store, Path(out_dir))
            if reason:
                skipped[name] = reason
            continue
        run_items(suite, name, client, cfg, suite_sampling, store, seed, batch_size, progress)
    summary = summarize(store, names, getattr(client, "name", "model"), Path(out_dir))
    summary["skipped"] = skipped
    write_json_atomic(Path(out_dir) / "results.json", summary)
    return summary


def run_items(
    suite: Any,
    name: str,
    client: ModelClient,
    cfg: dict[str, Any],
    sampling: dict[str, Any],
    store: RecordStore,
    seed: int,
    batch_size: int,
    progress: bool,
) -> None:
    """Play (multi-turn suites), then generate and score every unscored (item, sample)."""
    if hasattr(suite, "play"):
        done = {r["item_id"] for r in store.suite_records(name)}

        def chat(batch: list[list[dict]], _s: dict = sampling) -> list[str]:
            return client.complete(batch, _s)

        for batch in suite.play(chat, cfg, done):
            store.append({"suite": name, "sample": 0, **r} for r in batch)
    items = suite.load(cfg)
    k = int(cfg.get("samples", 1))
    todo = [(it, s) for it in items for s in range(k) if not store.has(name, it.id, s)]
    bar = tqdm(total=len(items) * k, initial=len(items) * k - len(todo), desc=name,
               disable=not progress)  # fmt: skip
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        by_sample: dict[int, list[int]] = defaultdict(list)
        for j, (_, s) in enumerate(chunk):
            by_sample[s].append(j)
        replies: list[str] = [""] * len(chunk)
        for s, idx in by_sample.items():
            got = client.complete([chunk[j][0].prompt for j in idx], {**sampling, "seed": seed + s})
            for j, reply in zip(idx, got, strict=True):
                replies[j] = reply
        records = []
        for (item, s), reply in zip(chunk, replies, strict=True):
            sc = suite.score(item, reply)
            records.append({"suite": name, "item_id": item.id, "sample": s,
                            "prompt": item.prompt, "response": reply,
                            "extracted": sc.extracted, "score": sc.value,
                            "detail": sc.detail})  # fmt: skip
        store.append(records)
        bar.update(len(chunk))
    bar.close()


def run_external(
    suite: Any,
    name: str,
    client: ModelClient,
    cfg: dict[str, Any],
    sampling: dict[str, Any],
    store: RecordStore,
    out_dir: Path,
) -> str | None:
    """A suite run by an outside harness against the client's endpoint (BFCL, tau2-bench,
    ACEBench): ``run_external(client, cfg, sampling, work_dir) -> (records, paper metrics)``.
    Done once: a rerun finds ``<suite>/metrics.json``. Returns the reason when it skips."""
    work_dir = out_dir / name
    metrics_path = work_dir / "metrics.json"
    if metrics_path.is_file() and store.suite_records(name):
        return None
    try:
        records, metrics = suite.run_external(client, cfg, sampling, work_dir)
    except SuiteSkipped as exc:
        return str(exc)
    store.append({"suite": name, "sample": 0, **r} for r in records)
    write_json_atomic(metrics_path, metrics)
    return None
