"""`spade-sandbox doctor` and `doctor_report`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from spade_sandbox import LAYERS, doctor_report
from spade_sandbox.cli import main

pytestmark = pytest.mark.timeout(60)


def test_report_lists_every_layer():
    report = doctor_report()
    for name in LAYERS:
        assert name in report
    assert "layers active" in report


def test_cli_json(capsys):
    assert main(["doctor", "--json"]) == 0
    layers = json.loads(capsys.readouterr().out)
    assert set(layers) == set(LAYERS)
    assert layers["seccomp"].startswith("active")


def test_cli_entry_point_runs_as_a_program():
    done = subprocess.run(
        [sys.executable, "-m", "spade_sandbox.cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "spade-sandbox doctor" in done.stdout


def test_bad_environment_variable_is_one_line_without_traceback(monkeypatch, capsys):
    monkeypatch.setenv("SPADE_SANDBOX_MEM_MIB", "plenty")
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "spade-sandbox: SPADE_SANDBOX_MEM_MIB='plenty' is not an integer"


def test_unknown_backend_is_reported(capsys):
    assert main(["doctor", "--backend", "nope", "--strict"]) == 1
    assert "unknown sandbox backend 'nope'" in capsys.readouterr().out
