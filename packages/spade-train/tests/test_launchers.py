"""Every launcher in cmd/ dry-runs its recipe (needs the ``spade train`` CLI and ``uv``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from spade_train.config import load_recipe

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM_ABLATIONS = (
    "no_corpus",
    "no_memory",
    "no_ed_training_no_memory",
    "fixed_gpt55",
    "two_skill",
    "learning_potential",
    "solve_rate",
)
TINKER_MODELS = (
    "qwen3_8b",
    "qwen3_8b_base",
    "qwen3_4b_instruct",
    "qwen3_30b_instruct",
    "gpt_oss_20b",
)
LAUNCHERS = sorted(p for p in (ROOT / "cmd").rglob("*.sh") if not p.name.startswith("_"))


def _recipe_of(script: Path) -> str:
    match = re.search(r"^spade_launch (\S+)", script.read_text(), re.MULTILINE)
    assert match, f"{script} does not call spade_launch"
    return match.group(1)


def test_launcher_matrix_is_complete() -> None:
    names = {str(p.relative_to(ROOT / "cmd")) for p in LAUNCHERS}
    for size in ("4b", "8b", "30b"):
        for stem in (
            "train_spade",
            "train_fixed_static",
            "train_fixed_procedural",
            "train_fixed_rlve",
        ):
            assert f"games/{stem}_{size}.sh" in names
        assert f"tool_use/train_spade_{size}.sh" in names
    for ablation in ("no_hint_regret", "no_role_norm"):  # this project's own
        assert f"ablations/{ablation}.sh" in names
    for ablation in UPSTREAM_ABLATIONS:
        assert f"ablations/train_{ablation}_30b.sh" in names
    for model in TINKER_MODELS:
        assert f"tinker/{model}/train_spade_tinker.sh" in names
    for folder in {p.parent for p in LAUNCHERS} | {ROOT / "cmd" / "tinker"}:
        assert (folder / "README.md").exists() or (folder.parent / "README.md").exists()


@pytest.mark.parametrize("script", LAUNCHERS, ids=lambda p: str(p.relative_to(ROOT / "cmd")))
def test_launcher_dry_run(script: Path, tmp_path: Path) -> None:
    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH; the launchers call `uv run spade`")
    text = script.read_text()
    assert "set -euo pipefail" in text
    env = dict(os.environ, DRY_RUN="1", WORKSPACE_DIR=str(tmp_path), UV_NO_SYNC="1")
    proc = subprocess.run(
        ["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    recipe = _recipe_of(script)
    who, keys = load_recipe(recipe).backend.unhonoured()
    if keys:  # refused, in one line, until its backend honours every key it sets
        assert proc.returncode == 2, proc.stdout[-2000:]
        line = proc.stderr.strip().splitlines()[-1]
        assert f"not honoured by the {who} backend" in line and recipe in line
        return
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert recipe in proc.stdout
