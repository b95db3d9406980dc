"""fixed-static on a released-layout corpus (compat mode) and the line said when it is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from spade_train.config import load_recipe
from spade_train.loop import start_run

RELEASE = Path(__file__).parents[2] / "spade-envs" / "tests" / "fixtures" / "upstream_release"


def test_one_cycle_on_a_released_corpus_plays_its_games_in_compat_mode(tmp_path):
    cfg = load_recipe(
        "quickstart",
        [
            "mode=fixed-static",
            f"fixed.corpus={RELEASE}",
            "backend.model=tiny:qwen3",
            "backend.micro_batch_size=8",
            "backend.max_seq_len=1024",
            "agent.envs_per_cycle=4",
            "agent.episodes_per_env=1",
            "agent.max_turns=2",
            "agent.sampling.max_new_tokens=8",
            "logging.progress=false",
            "logging.transcripts_per_cycle=8",
            "cycles=1",
        ],
    )
    rows = start_run(cfg, tmp_path / "run", progress=False).train()
    row = rows[0]
    assert row["play/envs"] == 4 and row["play/errors"] == 0  # numpy and deque games included
    assert row["play/episodes"] == 4 and row["play/return_hint"] is None  # no hint: no repeats
    assert row["pool/size"] == 4 and row["train/samples"] > 0
    transcripts = list((tmp_path / "run/transcripts/cycle_0001").glob("*.json"))
    texts = [json.loads(t.read_text())["messages"][1]["content"] for t in transcripts]
    assert any("trace of M*M" in t for t in texts)  # the numpy game's first observation


@pytest.mark.parametrize("corpus", [None, "/nonexistent/corpus"])
def test_a_missing_corpus_is_one_line_naming_the_fetch_command(tmp_path, corpus):
    env = {k: v for k, v in os.environ.items() if k != "CORPUS_DIR"}
    args = ["train", "--recipe", "fixed-static-4b", "--run-dir", str(tmp_path / "run")]
    # a trainer that honours every key the recipe sets, so the corpus is what is missing
    args += ["backend.options.inner=local", "backend.options.inner_options={}"]
    if corpus:
        args.append(f"fixed.corpus={corpus}")
    proc = subprocess.run(
        [sys.executable, "-m", "spade_train.cli", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "spade-envs fetch --out DIR" in proc.stderr and "CORPUS_DIR" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_released_games_keep_their_designed_turn_limit_within_the_budget(tmp_path):
    cfg = load_recipe(
        "quickstart", ["mode=fixed-static", f"fixed.corpus={RELEASE}", "agent.max_turns=8"]
    )
    loop = start_run(cfg, tmp_path / "run", progress=False)
    assert loop.seed_pool_from_corpus() == 4
    turns = {e.env_id: e.max_turns for e in loop.state.pool.sample(4, loop.state.rng)}
    assert turns == {"game_000000": 8, "game_000001": 8, "game_000002": 8, "game_000003": 5}
