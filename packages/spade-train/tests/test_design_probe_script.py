"""scripts/design_probe.py on a tiny model: one design step with the recipe's designer, every
design validated and counted, the totals adding up, the records written as JSON lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_every_design_is_reported_once_and_the_totals_add_up(tmp_path) -> None:
    out = tmp_path / "designs.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/design_probe.py"),
            "--cycles",
            "1",
            "--out",
            str(out),
            "backend.model=tiny:qwen3",
            "designer.sampling.max_new_tokens=8",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [x for x in done.stdout.splitlines() if x.startswith("cycle 1 ")]
    assert len(lines) == 4  # quickstart: 2 prompts x 2 completions
    total = re.search(r"^(\d+) designs: valid (\d+) \(\d+%\), new (\d+);", done.stdout, re.M)
    assert total and int(total[1]) == 4 and int(total[3]) <= int(total[2]) <= 4
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["outcome"] for r in rows] == [x.split()[3] for x in lines]
    assert all(r["cycle"] == 1 and r["text"].startswith("```python") for r in rows)


def test_a_bad_override_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/design_probe.py"), "designer.nope=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("design_probe: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_skeleton_designs_are_assembled_and_the_valid_ones_revalidated(tmp_path) -> None:
    out = tmp_path / "designs.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/design_probe.py"),
            "--cycles",
            "1",
            "--revalidate",
            "--out",
            str(out),
            "backend.model=tiny:qwen3",
            "designer.sampling.max_new_tokens=8",
            "designer.skeleton=holes",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4
    for r in rows:  # the template's prefix, the policy's hole, the template's suffix
        assert r["text"].startswith(f"```python\nimport random\nimport re\n\n\nclass {r['skill']}")
        assert "    def reset(self, seed=None):" in r["text"] and r["text"].endswith("```")
    valid = sum(r["valid"] for r in rows)
    said = re.search(r"^revalidated (\d+) valid designs .*: (\d+) rejected", done.stdout, re.M)
    assert said and int(said[1]) == valid and int(said[2]) <= valid
