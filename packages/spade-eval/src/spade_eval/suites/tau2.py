"""tau2-bench: retail, airline and telecom, the user simulated by a second endpoint.

Code and data: tau2-bench is not on PyPI; its environment (``$TAU2_PYTHON``, default
``~/.cache/spade-eval/tau2-venv``) is made from a clone by ``spade-eval setup-tau2 --source
CLONE`` (Python 3.12+), and the domains are read from ``$TAU2_DATA_DIR`` (the clone's
``data`` directory: ``tau2/domains/<domain>/tasks.json``, ``split_tasks.json``, db files). The
suite runs tau2's own ``run`` command per domain with the evaluated endpoint as the agent
(``openai/<served name>`` at the client's ``base_url``, ``.../v1``; sampling from the suite's ``sampling``) and
``--user-base-url`` as the user simulator (model ``user_llm``, key ``SPADE_USER_API_KEY``);
tau2's natural-language assertion judge is sent to the same user endpoint. Without a user
endpoint the suite is skipped with that reason. Results are tau2's ``results.json`` per
domain; a simulation passes when its reward is 1 (within 1e-6), as tau2's ``is_successful``.
Paper keys (upstream's): ``gem_eval/tau2_<domain>_<split>/pass_at_1`` (passed over all
simulations, errors counted as failures), ``.../num_simulations``, ``.../errors``, and
``gem_eval/tau2_overall_pass_at_1``. Upstream's settings: 4 trials, split ``base``, agent at
temperature 0.0, top_p 0.8, top_k 20; user ``gpt-4.1`` at 0.0.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import spade_envs as se

from ..errors import EvalDataError, SpadeEvalError, SuiteSkipped
from . import DataNeed, Item, Score, suite_config

DEFAULTS: dict[str, Any] = {"domains": ["retail", "airline", "telecom"], "split": "base",
                            "num_trials": 4, "task_ids": None, "max_steps": 200,
                            "max_concurrency": 16, "user_llm": "gpt-4.1", "timeout_s": 36000,
                            "samples": 1, "limit": None}  # fmt: skip
CLONE = ("git clone https://github.com/sierra-research/tau2-bench and set TAU2_DATA_DIR to "
         "its data directory")  # fmt: skip
SETUP = "run `spade-eval setup-tau2 --source CLONE` (or set TAU2_PYTHON)"
ERRORS = {"infrastructure_error", "unexpected_error", "too_many_errors", "timeout",
          "agent_error", "user_error"}  # fmt: skip
LAUNCHER = r"""
import json, os, sys
import tau2.config as config
import tau2.evaluator.evaluator_nl_assertions as nl
judge = "openai/" + os.environ["SPADE_TAU2_USER_MODEL"]
args = {"temperature": 0.0, **json.loads(os.environ["SPADE_TAU2_USER_ARGS"])}
config.DEFAULT_LLM_NL_ASSERTIONS = nl.DEFAULT_LLM_NL_ASSERTIONS = judge
config.DEFAULT_LLM_NL_ASSERTIONS_ARGS = nl.DEFAULT_LLM_NL_ASSERTIONS_ARGS = args
from tau2.cli import main
sys.argv = ["tau2", *sys.argv[1:]]
main()
"""


def data_dir() -> Path | None:
    """``$TAU2_DATA_DIR`` or None."""
    value = os.environ.get("TAU2_DATA_DIR", "").strip()
    return Path(value) if value else None


def python() -> Path:
    """tau2-bench's interpreter."""
    default = Path.home() / ".cache" / "spade-eval" / "tau2-venv" / "bin" / "python"
    return Path(os.environ.get("TAU2_PYTHON") or default)


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """Each domain's tasks and the interpreter."""
    cfg = suite_config(DEFAULTS, config, "tau2")
    root = data_dir()
    needs = []
    for domain in cfg["domains"]:
        path = root / "tau2" / "domains" / domain / "tasks.json" if root else None
        needs.append(DataNeed(str(path) if path else f"$TAU2_DATA_DIR/tau2/domains/{domain}/tasks.json",
                              bool(path and path.is_file()), CLONE))  # fmt: skip
    return needs + [DataNeed(str(python()), python().is_file(), SETUP)]


def setup(source: Path, venv: Path | None = None) -> Path:
    """Create tau2-bench's environment from a clone with uv (Python 3.12 or newer)."""
    target = venv or python().parent.parent
    if not (source / "pyproject.toml").is_file():
        raise SpadeEvalError(f"{source}: not a tau2-bench clone; {CLONE}")
    for cmd in (["uv", "venv", "--python", "3.12", str(target)],
                ["uv", "pip", "install", "--python", str(target / "bin" / "python"), str(source)]):  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SpadeEvalError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-300:]}")
    return target


def load(config: dict[str, Any]) -> list[Item]:
    """tau2 plays its own episodes (see `run_external`)."""
    suite_config(DEFAULTS, config, "tau2")
    return []


def score(item: Item, response: str) -> Score:
    """Not used: tau2 scores its own simulations."""
    raise SpadeEvalError("tau2 is scored by tau2-bench; use run_external")


def read_results(
    path: Path, domain: str, split: str
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Records (one per simulation) and upstream's keys from one tau2 ``results.json``."""
    sims = json.loads(path.read_text(encoding="utf-8"))["simulations"]
    records: list[dict[str, Any]] = []
    passed = errors = 0
    for sim in sims:
        reward = float((sim.get("reward_info") or {}).get("reward", 0.0))
        ok = abs(reward - 1.0) <= 1e-6
        reason = str(sim.get("termination_reason", ""))
        passed += ok
        errors += reason in ERRORS
        records.append({"item_id": f"{domain}/{sim['task_id']}/{sim.get('trial', 0)}", "prompt": [],
                        "response": "", "extracted": None, "score": 1.0 if ok else 0.0,
                        "detail": f"{reason} reward={reward:g}"})  # fmt: skip
    base = f"gem_eval/tau2_{domain}_{split}"
    n = len(sims)
    return records, {f"{base}/pass_at_1": passed / n if n else 0.0,
                     f"{base}/num_simulations": float(n), f"{base}/errors": float(errors)}  # fmt: skip


def run_external(
    client: Any, config: dict[str, Any], sampling: dict[str, Any], work_dir: Path
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Run tau2 per domain against the endpoint with the user simulator endpoint."""
    cfg = suite_config(DEFAULTS, config, "tau2")
    base_url = getattr(client, "base_url", None)
    if not base_url:
        raise SuiteSkipped("tau2 needs an OpenAI-compatible endpoint (--base-url or --ckpt)")
    user_url = os.environ.get("SPADE_USER_BASE_URL")
    if not user_url:
        raise SuiteSkipped(
            "tau2 needs a user simulator: pass --user-base-url (key from SPADE_USER_API_KEY)"
        )
    root = data_dir()
    for domain in cfg["domains"]:
        tasks = root / "tau2" / "domains" / domain / "tasks.json" if root else None
        if tasks is None or not tasks.is_file():
            raise EvalDataError(f"missing {tasks or '$TAU2_DATA_DIR'}; {CLONE}")
    if not python().is_file():
        raise EvalDataError(f"missing {python()}; {SETUP}")
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "tau2_launch.py").write_text(LAUNCHER, encoding="utf-8")
    agent_args = {"api_base": base_url, "api_key": "EMPTY"}
    agent_args |= {
        k: sampling[k] for k in ("temperature", "top_p", "top_k", "max_tokens") if k in sampling
    }
    user_args = {"api_base": se.normalise_base_url(user_url),
                 "api_key": os.environ.get("SPADE_USER_API_KEY") or "EMPTY"}  # fmt: skip
    env = {**os.environ, "TAU2_DATA_DIR": str(root), "SPADE_TAU2_USER_MODEL": cfg["user_llm"],
           "SPADE_TAU2_USER_ARGS": json.dumps(user_args)}  # fmt: skip
    records: list[dict[str, Any]] = []
    metrics: dict[str, float] = {}
    for domain in cfg["domains"]:
        out = work_dir / f"{domain}_{cfg['split']}"
        cmd = [str(python()), str(work_dir / "tau2_launch.py"), "run", "--domain", domain,
               "--agent-llm", f"openai/{getattr(client, 'name', 'default')}",
               "--agent-llm-args", json.dumps(agent_args), "--user-llm", f"openai/{cfg['user_llm']}",
               "--user-llm-args", json.dumps({"temperature": 0.0, **user_args}),
               "--task-split-name", cfg["split"], "--num-trials", str(cfg["num_trials"]),
               "--max-steps", str(cfg["max_steps"]), "--max-concurrency", str(cfg["max_concurrency"]),
               "--save-to", str(out)]  # fmt: skip
        if cfg["task_ids"]:
            cmd += ["--task-ids", *[str(t) for t in cfg["task_ids"]]]
        log = work_dir / f"tau2_{domain}.log"
        try:
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=int(cfg["timeout_s"])
            )
        except subprocess.TimeoutExpired:
            raise SpadeEvalError(f"tau2 {domain} ran past {cfg['timeout_s']} s") from None
        log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr, encoding="utf-8")
        if proc.returncode != 0 or not (out / "results.json").is_file():
            raise SpadeEvalError(f"tau2 run --domain {domain} exited {proc.returncode}; see {log}")
        got, keys = read_results(out / "results.json", domain, cfg["split"])
        records += got
        metrics |= keys
    total = [r["score"] for r in records]
    metrics["gem_eval/tau2_overall_pass_at_1"] = sum(total) / len(total) if total else 0.0
    return records, metrics
