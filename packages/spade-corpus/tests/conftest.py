"""Shared test hooks: the validator red-team suite's summary line."""

from __future__ import annotations

_REDTEAM = {"cases": 0, "contained": 0}


def pytest_runtest_logreport(report) -> None:
    """Count the red-team suite's tests: a case is contained when its test passes."""
    if "test_redteam_validate" in report.nodeid and report.when == "call":
        _REDTEAM["cases"] += 1
        _REDTEAM["contained"] += int(report.passed)


def pytest_terminal_summary(terminalreporter) -> None:
    if _REDTEAM["cases"]:
        terminalreporter.write_line(
            f"red team (spade-corpus): {_REDTEAM['cases']} cases, {_REDTEAM['contained']} contained"
        )
