"""The ``spade`` command on the cases a newcomer meets: a killed run's torn metrics line, a run
with no cycle yet, the recipe list, the plan's penalties, a fast ``--help`` and Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spade_train.cli import main
from spade_train.config import list_recipes, load_recipe
from spade_train.progress import StepProgress


def _row(cycle: int) -> dict:
    return {
        "cycle": cycle,
        "design/completions": 4,
        "design/valid": 1,
        "design/validity_rate": 0.25,
        "design/new": 1,
        "design/reasons": {"step_raised": 3},
        "play/return_hint": 0.25,
        "play/return_nohint": 0.125,
        "play/parsed_rate": 1.0,
        "play/ended": {"lost": 7, "won": 1},
        "reward/regret_mean": 0.125,
        "adv/agent_std": 0.8,
        "adv/designer_std": 0.6,
        "train/loss": 0.05,
        "pool/size": 13,
        "pool/skills": {"Math": 13},
        "time/cycle_s": 70.0,
    }


def _run_dir(tmp_path: Path, lines: list[str]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: quickstart\n")
    (run / "metrics.jsonl").write_text("".join(lines))
    return run


def test_inspect_skips_a_torn_last_line_with_a_warning(tmp_path, capsys):
    good = [json.dumps(_row(c)) + "\n" for c in (1, 2)]
    torn = json.dumps(_row(3))[:40]  # a run killed while it wrote cycle 3's row
    run = _run_dir(tmp_path, [*good, torn])
    assert main(["inspect", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "warning:" in err and "last line (3) is cut short" in err
    assert "step_raised 3" in out and "plots:" in out
    assert (run / "plots" / "summary.png").stat().st_size > 0


def test_a_torn_line_before_the_last_is_still_an_error(tmp_path, capsys):
    run = _run_dir(tmp_path, [json.dumps(_row(1))[:40] + "\n", json.dumps(_row(2)) + "\n"])
    assert main(["inspect", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1 is not JSON" in err
    assert not (run / "plots").exists()


def test_a_run_without_cycles_says_so_and_writes_nothing(tmp_path, capsys):
    run = _run_dir(tmp_path, [])
    assert main(["inspect", str(run)]) == 0
    assert "no cycles yet" in capsys.readouterr().out
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "metrics.jsonl"]
    (run / "metrics.jsonl").unlink()  # a run that started but never finished a cycle
    assert main(["inspect", str(run)]) == 0
    assert "no cycles yet" in capsys.readouterr().out
    assert not (run / "plots").exists()


def test_inspect_of_a_missing_or_foreign_directory_is_one_line(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "absent")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 2
    assert "is it a run directory" in capsys.readouterr().err


def test_recipes_lists_every_recipe_with_its_purpose_on_one_line(capsys):
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list_recipes()
    for line in lines:
        name, purpose = line.split(maxsplit=1)
        assert purpose.endswith((".", ")")) and len(purpose.split()) >= 5, line
    quickstart = next(x for x in lines if x.startswith("quickstart "))
    assert "SmolLM2-135M on CPU" in quickstart
    assert "cmd/games/train_spade_4b.sh" in next(x for x in lines if x.startswith("spade-games-4b"))


def test_the_plan_shows_every_penalty_the_designer_is_paid(capsys):
    assert main(["train", "--recipe", "quickstart", "--dry-run"]) == 0
    plan = " ".join(capsys.readouterr().out.split())
    r = load_recipe("quickstart").reward
    # the plan is a table whose cells wrap: compare the words, not the layout
    for label, value in [
        ("unparsed", r.invalid_penalty),
        ("parsed but invalid", r.parsed_invalid_penalty),
        ("valid copy", r.copy_reward),
        ("duplicate", r.reason_penalties["duplicate"]),
    ]:
        assert f"{label} {value:+.1f}" in plan.replace("│ ", "").replace(" │", ""), label


def test_help_and_recipes_import_no_heavy_library():
    code = (
        "import sys\n"
        "from spade_train.cli import main\n"
        "for argv in (['--help'], ['train', '--help'], ['recipes']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        # numpy stays: importing spade_envs registers its corpora with gymnasium (the Gymnasium
        # convention), and gymnasium imports numpy; `spade --help` measured 0.5 s with it
        "heavy = ('torch', 'transformers', 'matplotlib', 'rich', 'spade_sandbox')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_step_progress_off_a_terminal_is_a_few_plain_lines_on_its_stream():
    stream = io.StringIO()
    with StepProgress("cold start", 24, every_s=3600, stream=stream) as bar:
        for k in range(24):
            bar.advance(1, note=f"loss {1.0 / (k + 1):.3f}")
    lines = stream.getvalue().splitlines()
    assert [x.split(",")[0] for x in lines] == ["cold start: 0/24", "cold start: 24/24"]
    assert "loss 0.042" in lines[-1]


SMALL = [
    "backend.model=tiny:qwen3",
    "designer.prompts_per_cycle=1",
    "designer.group_size=2",
    "designer.sampling.max_new_tokens=16",
    "designer.scaffold=false",
    "designer.hint_source=reply",
    "cold_start.enabled=false",
    "validation.seeds=1",
    "agent.envs_per_cycle=2",
    "agent.episodes_per_env=1",
    "agent.hint_plays_per_env=1",
    "agent.max_turns=2",
    "agent.sampling.max_new_tokens=8",
    "logging.transcripts_per_cycle=2",
    "cycles=6",
]
LONG = [*SMALL[:-1], "cycles=200"]  # a cycle takes ~0.1 s: Ctrl-C must land before the end


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_in_train_is_one_line_keeps_what_finished_and_exits_130(tmp_path):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "spade_train.cli", "train", "--recipe", "quickstart", *LONG]
    proc = subprocess.Popen(
        [*cmd, "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the whole group: the sandbox workers too
    )
    latest, deadline = run / "checkpoints" / "LATEST", time.time() + 400
    while not latest.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "Traceback" not in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted: kept ") and f"spade resume {run}" in last
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows and rows[0]["cycle"] == 1 and len(rows) < 200
    assert (run / "transcripts" / "cycle_0001").is_dir()
    assert (run / "checkpoints" / f"cycle_{len(rows):04d}" / "state.json").is_file()


def test_the_documentation_states_the_penalties_the_quickstart_pays():
    """The recipes page's sentence on the quickstart's designer reward (the generated line
    beside it is the plan's own function) gives the recipe's numbers."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "recipes.md").read_text()
    r = load_recipe("quickstart").reward
    said = text[text.index("## The quickstart's designer reward") :]
    for value in (
        r.invalid_penalty,
        r.parsed_invalid_penalty,
        r.reason_penalties["solution_fails"],
        r.reason_penalties["duplicate"],
        r.copy_reward,
    ):
        assert f"{value:.1f}".replace("-", "−") in said, value


def test_ctrl_c_swallowed_by_a_finalizer_is_still_remembered():
    """Python ignores a KeyboardInterrupt raised inside ``__del__`` (it prints "Exception
    ignored"); the latch keeps it so the loop stops at the next cycle boundary."""
    import signal as sig

    from spade_train.cli import _SigintLatch

    class SignalledWhileCollected:
        def __del__(self) -> None:
            os.kill(os.getpid(), sig.SIGINT)
            for _ in range(100_000):  # the handler runs here; its exception is swallowed
                pass

    before = sig.getsignal(sig.SIGINT)
    with _SigintLatch() as latch:
        SignalledWhileCollected()
        assert latch.is_set()
    assert sig.getsignal(sig.SIGINT) is before
