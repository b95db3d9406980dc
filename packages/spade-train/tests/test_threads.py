"""The local backend's CPU thread governor (backends/threads.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch
from spade_train.backends.threads import ThreadGovernor


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_fixed_count_is_set_and_kept(restore_threads):
    governor = ThreadGovernor(1)
    assert governor.apply() == 1 and torch.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -2, "two", 1.5, True])
def test_bad_setting_is_a_one_line_error(bad):
    with pytest.raises(ValueError, match="threads must be 'auto' or an integer >= 1"):
        ThreadGovernor(bad)


def test_omp_num_threads_in_the_environment_fixes_the_count(monkeypatch, restore_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    governor = ThreadGovernor("auto")
    assert governor.fixed == 1 and governor.apply() == 1 and torch.get_num_threads() == 1


@pytest.mark.skipif(ThreadGovernor().cpus < 2, reason="needs at least 2 CPUs to give one up")
def test_auto_leaves_a_cpu_to_a_busy_process(restore_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    governor = ThreadGovernor("auto")
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(governor.cpus - 1)
    ]
    try:
        time.sleep(0.3)
        governor.apply()  # the first call measures a short window of its own
        time.sleep(0.5)
        threads = governor.apply()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert threads < governor.cpus
    assert torch.get_num_threads() == threads


def test_a_call_soon_after_the_last_keeps_the_decision(restore_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    governor = ThreadGovernor("auto")
    first = governor.apply()
    assert governor.others_busy() is None  # under the 0.25 s window: not judged
    assert governor.apply() == first
