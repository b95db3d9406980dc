"""ACEBench (English): normal, special, agent and the overall score as its scorer computes them.

Data and code: an ACEBench checkout at ``$ACEBENCH_DIR`` (``git clone
https://github.com/ACEBench/ACEBench``; not on PyPI), run with ``$ACEBENCH_PYTHON`` (default
``~/.cache/spade-eval/acebench-venv``; ``spade-eval setup-acebench`` creates it). The suite
copies the checkout into the run directory (``limit:`` keeps the first N records of each
category), generates with ACEBench's own ``generate.py`` through a launcher that routes the
evaluated model to the endpoint and the user simulator to ``--user-base-url``
(`acebench_launch`), scores with its ``eval_main.py`` and reads ``score_all/score_en``: a
group is the mean of its categories' accuracies (agent: ``end_to_end_accuracy``), overall =
0.578 normal + 0.2676 special + 0.1545 agent (ACEBench's weights, as upstream). Agent
categories need a user simulator: without ``--user-base-url`` they are skipped and the
overall is left out (upstream would count the agent group as 0).
Paper keys: ``acebench/en/<normal|special|agent|overall>``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import spade_envs as se

from ..errors import EvalDataError, SpadeEvalError, SuiteSkipped
from . import DataNeed, Item, Score, suite_config
from .acebench_launch import LAUNCHER

NORMAL = ["normal_single_turn_single_function", "normal_single_turn_parallel_function",
          "normal_multi_turn_user_adjust", "normal_multi_turn_user_switch", "normal_similar_api",
          "normal_preference", "normal_atom_bool", "normal_atom_enum", "normal_atom_number",
          "normal_atom_list", "normal_atom_object_deep", "normal_atom_object_short"]  # fmt: skip
SPECIAL = ["special_incomplete", "special_error_param", "special_irrelevant"]
AGENT = ["agent_multi_step", "agent_multi_turn"]
WEIGHTS = {"normal": 0.578, "special": 0.2676, "agent": 0.1545}
DEFAULTS: dict[str, Any] = {"categories": NORMAL + SPECIAL + AGENT, "limit": None, "samples": 1,
                            "num_threads": 16, "max_dialog_turns": 40, "user_model": "gpt-4o",
                            "timeout_s": 36000}  # fmt: skip
CLONE = "git clone https://github.com/ACEBench/ACEBench and set ACEBENCH_DIR to it"
SETUP = "run `spade-eval setup-acebench` (or set ACEBENCH_PYTHON)"
PACKAGES = ["openai", "python-dotenv", "tqdm", "pandas", "openpyxl", "wcwidth"]
LABEL = "qwen-spade-eval"  # no "agent" in it: ACEBench reads that word in paths as a category


def checkout() -> Path | None:
    """``$ACEBENCH_DIR`` or None."""
    value = os.environ.get("ACEBENCH_DIR", "").strip()
    return Path(value) if value else None


def python() -> Path:
    """ACEBench's interpreter."""
    default = Path.home() / ".cache" / "spade-eval" / "acebench-venv" / "bin" / "python"
    return Path(os.environ.get("ACEBENCH_PYTHON") or default)


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """The checkout and its interpreter."""
    root = checkout()
    main = root / "eval_main.py" if root else None
    return [DataNeed(str(main) if main else "$ACEBENCH_DIR/eval_main.py",
                     bool(main and main.is_file()), CLONE),
            DataNeed(str(python()), python().is_file(), SETUP)]  # fmt: skip


def setup(venv: Path | None = None) -> Path:
    """Create ACEBench's environment with uv."""
    target = venv or python().parent.parent
    for cmd in (["uv", "venv", "--python", "3.11", str(target)],
                ["uv", "pip", "install", "--python", str(target / "bin" / "python"), *PACKAGES]):  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SpadeEvalError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-300:]}")
    return target


def load(config: dict[str, Any]) -> list[Item]:
    """ACEBench generates through its own harness (see `run_external`)."""
    suite_config(DEFAULTS, config, "acebench")
    return []


def score(item: Item, response: str) -> Score:
    """Not used: ACEBench scores its own generations."""
    raise SpadeEvalError("acebench is scored by ACEBench's eval_main.py; use run_external")


def working_copy(source: Path, dest: Path, categories: list[str], limit: int | None) -> None:
    """Copy the checkout (English data of ``categories`` only, first ``limit`` records)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git", "data_zh", "result_all",
                                                                 "score_all", "docs", "fig"))  # fmt: skip
    data = dest / "data_all" / "data_en"
    for sub in (data, data / "possible_answer"):
        for path in sub.glob("data_*.json"):
            name = path.name[len("data_") : -len(".json")]
            if name not in categories:
                path.unlink()
            elif limit:
                lines = path.read_text(encoding="utf-8").splitlines()[:limit]
                path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def group_scores(copy: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per-record records (every generated id; 0 where the score file lists it as wrong) and
    the group/overall keys, from ACEBench's result and score files in the working copy."""
    score_dir = copy / "score_all" / "score_en" / LABEL
    result_dir = copy / "result_all" / "result_en" / LABEL
    groups: dict[str, list[float]] = {"normal": [], "special": [], "agent": []}
    records: list[dict[str, Any]] = []
    for path in sorted(score_dir.glob("data_*_score.json")):
        name = path.name[len("data_") : -len("_score.json")]
        group = "normal" if name in NORMAL else "special" if name in SPECIAL else "agent"
        lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        head = lines[0]
        groups[group].append(float(head["end_to_end_accuracy" if group == "agent" else "accuracy"]))
        wrong = {str(r.get("id")): r for r in lines[1:] if isinstance(r, dict)}
        results = result_dir / f"data_{name}_result.json"
        for line in results.read_text(encoding="utf-8").splitlines() if results.is_file() else []:
            row = json.loads(line)
            rid = str(row["id"])
            bad = wrong.get(rid)
            records.append({"item_id": f"{name}/{rid}", "prompt": [],
                            "response": str(row.get("result"))[:2000], "extracted": None,
                            "score": 0.0 if bad else 1.0,
                            "detail": str(bad.get("error_type", "")) if bad else ""})  # fmt: skip
    metrics = {f"acebench/en/{g}": sum(v) / len(v) for g, v in groups.items() if v}
    if all(groups.values()):
        metrics["acebench/en/overall"] = sum(
            WEIGHTS[g] * metrics[f"acebench/en/{g}"] for g in WEIGHTS
        )
    return records, metrics


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: int) -> None:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise SpadeEvalError(f"ACEBench {cmd[1]} ran past {timeout_s} s; see {log}") from None
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise SpadeEvalError(f"ACEBench {cmd[1]} exited {proc.returncode}; see {log}")


def run_external(
    client: Any, config: dict[str, Any], sampling: dict[str, Any], work_dir: Path
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Generate with ACEBench's harness against ``client.base_url`` and score with its scorer."""
    cfg = suite_config(DEFAULTS, config, "acebench")
    base_url = getattr(client, "base_url", None)
    if not base_url:
        raise SuiteSkipped("acebench needs an OpenAI-compatible endpoint (--base-url or --ckpt)")
    root = checkout()
    if root is None or not (root / "eval_main.py").is_file():
        raise EvalDataError(
            f"missing {root / 'eval_main.py' if root else '$ACEBENCH_DIR'}; {CLONE}"
        )
    if not python().is_file():
        raise EvalDataError(f"missing {python()}; {SETUP}")
    user_url = os.environ.get("SPADE_USER_BASE_URL")
    categories = [c for c in cfg["categories"] if user_url or c not in AGENT]
    if not categories:
        raise SuiteSkipped("only agent categories were asked for and no --user-base-url is given")
    copy = work_dir / "acebench"
    work_dir.mkdir(parents=True, exist_ok=True)
    working_copy(root, copy, categories, cfg["limit"])
    (copy / "spade_launch_generate.py").write_text(LAUNCHER, encoding="utf-8")
    env = {**os.environ, "SPADE_ACE_LABEL": LABEL, "SPADE_ACE_AGENT_URL": base_url,
           "SPADE_ACE_SERVED_MODEL": getattr(client, "name", "default"),
           "SPADE_ACE_CATEGORIES": ",".join(categories),
           "SPADE_ACE_USER_URL": se.normalise_base_url(user_url) if user_url else "",
           "SPADE_ACE_USER_KEY": os.environ.get("SPADE_USER_API_KEY", "")}  # fmt: skip
    gen = [str(python()), "spade_launch_generate.py", "--model", LABEL, "--category",
           "spade_selected", "--language", "en",
           "--temperature", str(sampling.get("temperature", 0.7)),
           "--top-p", str(sampling.get("top_p", 1.0)),
           "--max-tokens", str(sampling.get("max_tokens", 1200)),
           "--num-threads", str(cfg["num_threads"]),
           "--max-dialog-turns", str(cfg["max_dialog_turns"]), "--user-model", cfg["user_model"]]  # fmt: skip
    timeout_s = int(cfg["timeout_s"])
    _run(gen, copy, env, work_dir / "acebench_generate.log", timeout_s)
    (copy / "score_all" / "score_en" / LABEL).mkdir(parents=True, exist_ok=True)
    evl = [str(python()), "eval_main.py", "--model", LABEL, "--category", *categories,
           "--language", "en"]  # fmt: skip
    _run(evl, copy, env, work_dir / "acebench_eval.log", timeout_s)
    records, metrics = group_scores(copy)
    if not user_url and any(c in AGENT for c in cfg["categories"]):
        metrics["acebench/en/agent_skipped"] = 1.0
    return records, metrics
