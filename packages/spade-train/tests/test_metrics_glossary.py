"""Every metric key the code writes is explained in docs/reference/metrics.md.

Two nets: real tiny runs (every mode, the designer pipeline's stages, held-out games, in-loop
evaluation) collect the keys their rows carry, and a scan of the source collects the literal
keys of the code that writes rows, so a key in a branch no run here reaches is caught too."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from spade_train.config import load_recipe
from spade_train.loop import start_run

ROOT = Path(__file__).resolve().parents[3]
GLOSSARY = ROOT / "docs" / "reference" / "metrics.md"
SRC = ROOT / "packages" / "spade-train" / "src" / "spade_train"
# Where rows are written, and the prefix each module's keys get on their way into the row.
WRITERS = {
    "cycle.py": "",
    "loop.py": "",
    "spread.py": "",
    "steps/play.py": "",
    "steps/validate.py": "",
    "steps/admit.py": "",
    "sources.py": "",
    "core/rlve_source.py": "",
    "steps/learn.py": "reward/",
    "core/rewards.py": "reward/",
    "backends/local.py": "train/",
    "loss.py": "train/",
}
NAMESPACES = (
    "cycle|design|play|heldout|reward|adv|train|pool|memory|self_judge|difficulty|rlve|eval|time"
)
TINY = [
    "backend.model=tiny:qwen3",
    "backend.micro_batch_size=8",
    "cold_start.enabled=false",
    "designer.prompts_per_cycle=1",
    "designer.group_size=2",
    "designer.sampling.max_new_tokens=16",
    "designer.scaffold=false",
    "designer.hint_source=reply",
    "validation.seeds=1",
    "agent.envs_per_cycle=2",
    "agent.episodes_per_env=1",
    "agent.hint_plays_per_env=1",
    "agent.max_turns=1",
    "agent.sampling.max_new_tokens=4",
    "logging.progress=false",
    "cycles=1",
]


def glossary() -> list[re.Pattern[str]]:
    keys = re.findall(r"^\| `([^`]+)` \|", GLOSSARY.read_text(encoding="utf-8"), flags=re.M)
    assert len(keys) > 60, "the glossary's tables were not found"
    patterns = []
    for key in keys:
        parts = re.split(r"(<[^>]+>)", key)
        regex = "".join(
            (".+" if p.endswith("...>") else "[^/]+") if p.startswith("<") else re.escape(p)
            for p in parts
        )
        patterns.append(re.compile(f"^{regex}$"))
    return patterns


def unexplained(keys: set[str]) -> list[str]:
    patterns = glossary()
    return sorted(k for k in keys if not any(p.match(k) for p in patterns))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_key_of_real_runs_is_in_the_glossary(tmp_path):
    runs = [
        (
            "quickstart",
            [
                "designer.pipeline.reset_gate.enabled=true",
                "designer.pipeline.self_judge.enabled=true",
                "eval.heldout=starter",
                "eval.heldout_every=1",
            ],
        ),
        ("quickstart", ["mode=fixed-procedural", "fixed.generators=[gcd,lcm]"]),
    ]
    if importlib.util.find_spec("spade_eval"):
        evals = ["eval.every=1", "eval.config=quick", "eval.suites=[procedural]", "eval.limit=1"]
        runs.append(("quickstart", ["mode=fixed-static", *evals]))
    if importlib.util.find_spec("Gym"):
        rlve = ["mode=fixed-rlve", "rlve.envs=[Division,Sorting]", "rlve.tau_num=2"]
        runs.append(("quickstart", rlve))
    keys: set[str] = set()
    for i, (recipe, extra) in enumerate(runs):
        cfg = load_recipe(recipe, [*TINY, *extra])
        for row in start_run(cfg, tmp_path / f"run{i}", progress=False).train():
            keys |= set(row)
    assert {"design/valid", "heldout/return_hint", "adv/designer_flat_groups"} <= keys
    assert unexplained(keys) == []


def _literal_keys(path: Path, prefix: str) -> set[str]:
    """String constants and f-strings (their fields as ``x``) that look like metric keys."""
    found: set[str] = set()
    shape = re.compile(rf"^({NAMESPACES}|sys|agent|designer)(/[\w.:@-]+)+$")
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
        # "train/{k}" passes another module's keys through; "designer/skill_" is a prefix test
        if text and shape.match(text) and not text.endswith(("/x", "_", "/")):
            full = text if re.match(rf"^({NAMESPACES})/", text) else prefix + text
            found.add(full)
    return found


def test_every_literal_key_in_the_code_that_writes_rows_is_in_the_glossary():
    keys: set[str] = set()
    for name, prefix in WRITERS.items():
        keys |= _literal_keys(SRC / name, prefix)
    assert {"design/validity_rate", "self_judge/no", "difficulty/max_high"} <= keys
    # the training step's bare names (loss, clip_frac, ...) are the real runs' to catch
    assert {"train/sys/threads", "reward/designer/released", "train/sys/prompt_tokens_x"} <= keys
    assert unexplained(keys) == []


@pytest.mark.parametrize("key", ["adv/agent_stdx", "train", "eval", "design/valid/extra"])
def test_the_glossary_check_refuses_what_it_lacks(key):
    assert unexplained({key}) == [key]
