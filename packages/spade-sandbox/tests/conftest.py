"""Shared fixtures: small limits so faults surface fast, a permissive import policy to reach
the deeper layers, and host-side accounting (child processes, open fds)."""

from __future__ import annotations

import gc
import os
import textwrap

import pytest
from spade_sandbox import DEFAULT_ALLOWED_IMPORTS, Limits, SandboxConfig

OS_MODULES = frozenset(
    {"os", "sys", "socket", "subprocess", "ctypes", "threading", "_thread", "signal", "pickle",
     "marshal", "importlib", "builtins", "gc", "inspect", "resource", "posix", "stat"}
)  # fmt: skip

GAME = textwrap.dedent(
    '''
    import random


    class GuessEnv:
        """Guess a number in 1..n; reward 1 when right."""

        def __init__(self, max_turns=10, n=10):
            self.max_turns = max_turns
            self.n = n

        def reset(self, seed=None):
            self.rng = random.Random(seed)
            self.target = self.rng.randint(1, self.n)
            self.turn = 0
            return f"Guess a number from 1 to {self.n}.", {"n": self.n}

        def step(self, action):
            self.turn += 1
            guess = action.strip().removeprefix("\\\\boxed{").removesuffix("}")
            if guess == str(self.target):
                return "Correct.", 1.0, True, False, {"turn": self.turn}
            hint = "higher" if guess.isdigit() and int(guess) < self.target else "lower"
            return f"Wrong, go {hint}.", 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}

        def solution(self):
            return f"\\\\boxed{{{self.target}}}"

        def close(self):
            pass
    '''
)


def make_env_source(
    step: str = 'return "obs", 0.0, False, False, {}',
    reset: str = 'return "start", {}',
    init: str = "pass",
    header: str = "",
    extra: str = "",
) -> str:
    """Source of a one-class environment whose method bodies are given as code."""

    def body(code: str) -> str:
        return textwrap.indent(textwrap.dedent(code).strip(), " " * 8)

    return (
        textwrap.dedent(header).strip()
        + "\n\n\nclass AttackEnv:\n"
        + "    def __init__(self, max_turns=10, **kwargs):\n" + body(init) + "\n\n"
        + "    def reset(self, seed=None):\n" + body(reset) + "\n\n"
        + "    def step(self, action):\n" + body(step) + "\n"
        + textwrap.indent(textwrap.dedent(extra), "    ")
    )  # fmt: skip


@pytest.fixture(scope="session")
def config() -> SandboxConfig:
    return SandboxConfig(
        limits=Limits(
            call_wall_s=1.5,
            episode_wall_s=30.0,
            cpu_s=20,
            mem_mib=256,
            max_output_kib=64,
            max_steps=50,
        )
    )


@pytest.fixture(scope="session")
def permissive(config: SandboxConfig) -> SandboxConfig:
    """The default layers with the import policy opened up, to show the OS layers hold alone."""
    return config.replace(allowed_imports=DEFAULT_ALLOWED_IMPORTS | OS_MODULES)


def child_pids() -> set[int]:
    """Processes whose parent is this test process."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            found.add(int(entry))
    return found


def descendants() -> set[int]:
    """Every process below this one (sandboxes nest: bwrap, its init, the zygote, workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def open_fds() -> int:
    gc.collect()  # sockets and pipes only garbage holds would otherwise close mid-test
    return len(os.listdir("/proc/self/fd"))


# -- the red-team suite's summary line (test_redteam.py; spade-corpus has its own) ---------
_REDTEAM = {"cases": 0, "contained": 0}


def pytest_runtest_logreport(report) -> None:
    if "test_redteam" in report.nodeid and report.when == "call":
        _REDTEAM["cases"] += 1
        _REDTEAM["contained"] += int(report.passed)


def pytest_terminal_summary(terminalreporter) -> None:
    if _REDTEAM["cases"]:
        terminalreporter.write_line(
            f"red team (spade-sandbox): {_REDTEAM['cases']} cases, {_REDTEAM['contained']} contained"
        )
