"""scripts/design_audit.py on a run directory written by hand: a starter game copied verbatim
(valid, a copy, nearest Jaccard 1), the mutation of it that the 2026-12-07 experiment's runs
accepted on 2 seeds ("I doubled a number and got 7", answer 7: the question prints the
answer, and the strict validator's probes reject it) and a reply that failed to parse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import spade_envs as se

ROOT = Path(__file__).resolve().parents[3]


def _row(skill: str, source: str | None, valid: bool, **extra: object) -> dict[str, object]:
    text = "```python\n" + (source or "class Broken(:\n") + "```"
    return {"skill": skill, "text": text, "valid": valid, "hint": "Read the question.", **extra}


def test_the_audit_counts_copies_new_designs_and_strict_rejections(tmp_path: Path) -> None:
    starter = se.load_corpus(se.resolve_corpus_path("starter"))
    halving = starter.source("math_halving")
    leaking = halving.replace("total = 2 * self.answer", "total = self.answer")
    assert leaking != halving
    run = tmp_path / "run"
    (run / "designs").mkdir(parents=True)
    (run / "config.yaml").write_text("agent:\n  max_turns: 3\n")
    rows = [
        _row("Math", halving, True, copy_of="ref:starter/math_halving", reason=None),
        _row("Math", leaking, True, copy_of=None, reason=None),
        _row("Logic", None, False, copy_of=None, reason="syntax_error"),
    ]
    (run / "designs" / "cycle_0001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "audit.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/design_audit.py"), str(run), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (audit,) = json.loads(out.read_text())
    assert (audit["designs"], audit["valid"], audit["copies"], audit["new"]) == (3, 2, 1, 1)
    assert audit["failed"] == {"syntax_error": 1}
    assert audit["revalidated"] == 2 and sum(audit["rejected"].values()) == 1
    assert next(iter(audit["rejected"])).startswith("probe_wins:")
    assert "| run | 2/3 (67%) | 1 | 1 |" in done.stdout


def test_a_directory_that_is_no_run_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/design_audit.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "not a run directory" in done.stderr
    assert "Traceback" not in done.stderr
