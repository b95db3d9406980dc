"""``spade-eval``'s commands are discoverable: the top-level help lists each with one line, an
unknown word is one line naming the commands, and each command has its own help."""

from __future__ import annotations

import subprocess
import sys

import pytest
from spade_eval import cli


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from spade_eval.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)


def test_help_lists_every_command_with_a_line():
    done = _run("--help")
    assert done.returncode == 0
    for name in ["run", *cli.COMMANDS]:
        assert any(line.split()[:1] == [name] for line in done.stdout.splitlines()), name
    assert set(cli.SUMMARIES) == {"run", *cli.COMMANDS}


def test_no_command_prints_the_list_and_fails():
    done = _run()
    assert done.returncode == 2 and "prepare-aime" in done.stderr


def test_an_unknown_command_is_one_line_naming_the_commands():
    done = _run("foo")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: unknown command 'foo'; the commands are {', '.join(cli.SUMMARIES)}"
    ]
    assert "Traceback" not in done.stderr and "--out" not in done.stderr


@pytest.mark.parametrize("name", ["run", *cli.COMMANDS])
def test_each_command_has_its_own_help(name):
    done = _run(name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: spade-eval") and (name in done.stdout.split("\n")[0])


def test_bare_flags_still_mean_run():
    done = _run("--limit", "1")
    assert done.returncode == 2 and "--out" in done.stderr  # run's own parser answered
