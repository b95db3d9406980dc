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
    assert governor.start() == 1 and torch.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -2, "two", 1.5, True])
def test_bad_setting_is_a_one_line_error(bad):
    with pytest.raises(ValueError, match="threads must be 'auto' or an integer >= 1"):
        ThreadGovernor(bad)


def test_omp_num_threads_in_the_environment_fixes_the_count(monkeypatch, restore_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    governor = ThreadGovernor("auto")
    assert governor.fixed == 1 and governor.start() == 1 and torch.get_num_threads() == 1


@pytest.mark.skipif(ThreadGovernor().cpus < 2, reason="needs at least 2 CPUs to give one up")
def test_auto_leaves_a_cpu_to_a_busy_process(restore_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    governor = ThreadGovernor("auto")
    governor.start()  # the first call takes a short look at the machine
    governor.stop()
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(governor.cpus - 1)
    ]
    try:
        time.sleep(0.2)
        with governor.governing():
            time.sleep(0.6)  # the "heavy call": the spinners run meanwhile
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    threads = governor.start()
    assert threads < governor.cpus and torch.get_num_threads() == threads
    governor.stop()


def test_a_short_call_keeps_the_decision(restore_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    governor = ThreadGovernor("auto")
    governor._first, governor.threads = False, 1
    with governor.governing() as threads:
        pass  # under the 0.25 s window: not judged
    assert threads == 1 and governor.start() == 1


@pytest.mark.skipif(ThreadGovernor().cpus < 2, reason="needs at least 2 CPUs to give one up")
def test_a_long_call_follows_load_that_starts_inside_it(restore_threads, monkeypatch):
    import spade_train.backends.threads as threads_module

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads_module, "_TICK_S", 0.5)
    governor = ThreadGovernor("auto")
    governor._first, governor.threads = False, governor.cpus
    with governor.governing():
        spinners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(governor.cpus - 1)
        ]
        try:
            time.sleep(0.7)
            governor.tick()  # a decoding step after the window: re-judged inside the call
            inside = torch.get_num_threads()
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    assert inside < governor.cpus
