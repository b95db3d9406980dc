"""`spade-corpus validate` through its add_arguments/run functions: exit codes, report file."""

import argparse
import json
from pathlib import Path

from spade_corpus import validate_cli as validate

BAD_ENVS = Path(__file__).parent / "bad_envs"
HINT = "Binary search: guess the midpoint of the numbers still possible."


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spade-corpus validate")
    validate.add_arguments(parser)
    return validate.run(parser.parse_args([*argv, "--no-progress"]))


def test_example_corpus_exit_0_and_report(tmp_path, capsys):
    out = tmp_path / "report.json"
    out.write_text("old")
    assert main(["example", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["summary"]["valid"] == 60 and len(report["reports"]) == 60
    assert "60/60 valid" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp file left


def test_py_files_with_one_invalid_exit_1(capsys):
    files = [str(BAD_ENVS / "valid_guess_number.py"), str(BAD_ENVS / "seed_ignored.py")]
    assert main([*files, "--hint", HINT]) == 1
    out = capsys.readouterr().out
    assert "seed_ignored.py: INVALID [seed_ignored]" in out and "1/2 valid" in out


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    bad_jsonl = tmp_path / "broken.jsonl"
    bad_jsonl.write_text('{"id": "a"\n')
    cases = [
        ([str(BAD_ENVS / "valid_guess_number.py")], "--hint TEXT"),
        ([str(tmp_path / "missing.py"), "--hint", HINT], "no such file"),
        (["example", "--hint", HINT], "--hint applies to .py files only"),
        ([str(tmp_path / "nowhere")], "not found"),
        ([str(bad_jsonl)], "line 1"),
        (["example", "--out", str(tmp_path / "no" / "r.json")], "does not exist"),
        (["example", "--workers", "0"], "--workers"),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err and "Traceback" not in err, err
    assert not (tmp_path / "no").exists()


def test_a_judged_rejection_prints_its_evidence(capsys):
    assert main([str(BAD_ENVS / "probe_wins.py"), "--hint", HINT]) == 1
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if "INVALID [probe_wins:empty_box]" in line)
    assert lines[at + 1].startswith("  evidence: probe=") and "seed=" in lines[at + 1]


def test_seeds_are_drawn_printed_and_reproduced_by_seed_root(tmp_path, capsys):
    """No fixed seed list: a fresh root each run, printed; ``--seed-root`` replays it."""
    good = [str(BAD_ENVS / "valid_guess_number.py"), "--hint", HINT, "--seeds", "3"]
    reports = []
    for i, extra in enumerate([[], ["--seed-root", "41"], ["--seed-root", "41"]]):
        out = tmp_path / f"r{i}.json"
        assert main([*good, *extra, "--out", str(out)]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("seeds drawn from root ") and "--seed-root" in first
        reports.append(json.loads(out.read_text()))
    seeds = [r["reports"][0]["checks"]["seeds"][:3] for r in reports]
    assert seeds[1] == seeds[2] == list(__import__("spade_envs").draw_seeds(41, 3))
    assert reports[1]["seed_root"] == 41 and seeds[0] != seeds[1]
    assert main([*good, "--seed-root", "-1"]) == 2
    assert "--seed-root must be in" in capsys.readouterr().err
