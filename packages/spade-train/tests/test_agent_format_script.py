"""scripts/agent_format.py on a tiny model: it plays every starter training game with the
recipe's agent settings and reports the parsed share, the return and the system prompt used."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import spade_envs as se

ROOT = Path(__file__).resolve().parents[3]
TINY = ["backend.model=tiny:qwen3", "agent.sampling.max_new_tokens=4", "agent.max_turns=1"]


def _run(*args: str) -> str:
    script = str(ROOT / "scripts/agent_format.py")
    done = subprocess.run(
        [sys.executable, script, "--seeds", "2", *args, *TINY],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_recipe_prompt_or_the_default_is_played_and_the_counts_add_up():
    games = sum(r.split == "train" for r in se.load_corpus("starter").records)
    out = _run()
    assert "reply with your move only" in out.splitlines()[0]  # the quickstart's own prompt
    found = re.search(r"parsed ([0-9.]+) of (\d+) turns, mean return (-?[0-9.]+) over (\d+)", out)
    assert found, out
    share, turns, episodes = float(found[1]), int(found[2]), int(found[4])
    assert episodes == 2 * games and turns == episodes  # one turn each (agent.max_turns=1)
    assert 0.0 <= share <= 1.0
    default = _run("--default-system-prompt")
    assert repr(se.DEFAULT_SYSTEM_PROMPT) in default.splitlines()[0]


def test_a_bad_override_is_one_line_and_no_model_is_loaded():
    script = str(ROOT / "scripts/agent_format.py")
    done = subprocess.run(
        [sys.executable, script, "agent.max_turns=zero"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("agent_format: ") and done.stderr.count("\n") == 1
    assert "agent.max_turns" in done.stderr
