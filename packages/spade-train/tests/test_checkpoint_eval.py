"""Train, then evaluate what was trained: a run's checkpoint is a plain Hugging Face model
directory that spade-eval (and transformers) load as it is, and the run still resumes from it."""

from __future__ import annotations

import json

import pytest
import spade_eval as sev
from spade_train.config import load_recipe
from spade_train.loop import resume_run, start_run

TINY = [
    "backend.model=tiny:qwen3",
    "cycles=1",
    "mode=fixed-static",
    "agent.envs_per_cycle=2",
    "agent.episodes_per_env=1",
    "agent.max_turns=1",
    "agent.sampling.max_new_tokens=4",
    "logging.progress=false",
]

EVAL = {
    "seed": 0,
    "batch_size": 8,
    "sampling": {"temperature": 0.0, "max_tokens": 8},
    "suites": {"procedural": {"tasks": ["basic_arithmetic"], "size": 3, "seed": 0, "games": False}},
}


@pytest.mark.timeout(600)
def test_one_cycle_then_spade_eval_scores_its_checkpoint_and_the_run_resumes(tmp_path):
    cfg = load_recipe("quickstart", TINY)
    start_run(cfg, tmp_path / "run", progress=False).train()
    cycle = tmp_path / "run" / "checkpoints" / "cycle_0001"
    policy = cycle / "policy"
    assert (policy / "config.json").is_file() and (policy / "generation_config.json").is_file()
    assert not list(policy.glob("*.pt")) and (cycle / "policy.trainer.pt").is_file()

    summary = sev.evaluate(sev.HFClient(str(policy), batch_size=4), EVAL, tmp_path / "eval")
    suite = summary["suites"]["procedural"]
    assert suite["n"] == 3 and 0.0 <= suite["mean"] <= 1.0
    records = (tmp_path / "eval" / "records.jsonl").read_text().splitlines()
    assert len(records) == 3 and all("response" in json.loads(r) for r in records)

    # the standard layout is also what `spade resume` reads back
    text = (tmp_path / "run" / "config.yaml").read_text().replace("cycles: 1", "cycles: 2")
    (tmp_path / "run" / "config.yaml").write_text(text)
    rows = resume_run(tmp_path / "run", progress=False).train()
    assert [r["cycle"] for r in rows] == [1, 2]
