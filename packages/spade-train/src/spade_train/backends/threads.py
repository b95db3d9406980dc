"""How many CPU threads torch may use, decided before each heavy call of the local backend.

Measured on a 2-core VM (SmolLM2-135M, 16 conversations x 64 new tokens, seconds): idle, two
threads 6.5, one 10.9; beside one CPU-bound process 9.7 and 10.0; beside two, 14.9 and 9.8;
beside one while another engineer's niced test jobs also ran, 51-73 and 10.5. OpenMP's
threads wait at every barrier for a partner the scheduler has put off the CPU, so on a busy
machine two threads can cost several times one.

``threads: auto`` (the default) therefore measures, while each generation or train step runs,
how much CPU the *other* processes use (``/proc/stat`` minus this process's own time) and
gives the next call the CPUs they left free, at least one; a long call re-judges every
2 s (each decoding step and micro-batch ticks), the first one after a 0.25 s look. Only the
time of the heavy calls counts: between them this process's own sandbox workers (children,
not yet reaped) run the environments and would look like other load. Processes running at a lower priority than
ours (``nice``) do not count: the scheduler hands their CPU to us. An integer fixes the
count; so does ``OMP_NUM_THREADS`` in the environment. The thread count changes float sums in
the last bits (tokens identical, log-probs within 2e-5 in a check); fix it for bit-exact runs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch

_STAT = Path("/proc/stat")
_MIN_WINDOW_S = 0.25  # shorter windows are too noisy to judge by
_TICK_S = 2.0  # how often a long call re-judges


def _allowed_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _machine_busy_s(include_niced: bool) -> float | None:
    """CPU seconds all processes have used since boot (None where /proc/stat is missing)."""
    try:
        fields = _STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    user, nice, system, _, _, irq, softirq, steal = ticks
    busy = user + system + irq + softirq + steal + (nice if include_niced else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def _own_busy_s() -> float:
    t = os.times()
    return t.user + t.system


class ThreadGovernor:
    """Sets ``torch.set_num_threads`` before a heavy call; see the module docstring."""

    def __init__(self, setting: int | str = "auto"):
        if setting != "auto" and (isinstance(setting, bool) or not isinstance(setting, int)):
            raise ValueError(
                f"local backend: threads must be 'auto' or an integer >= 1, not {setting!r}"
            )
        if isinstance(setting, int) and setting < 1:
            raise ValueError(
                f"local backend: threads must be 'auto' or an integer >= 1, not {setting}"
            )
        self.cpus = _allowed_cpus()
        self.fixed: int | None = None
        if isinstance(setting, int):
            self.fixed = setting
        elif os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
            self.fixed = max(1, int(os.environ["OMP_NUM_THREADS"]))
        # our own time lands in /proc/stat's "nice" column when we run niced ourselves
        self.include_niced = os.getpriority(os.PRIO_PROCESS, 0) > 0
        self._started: tuple[float, float, float] | None = None
        self._first = True
        self.threads = self.fixed or self.cpus
        if self.fixed:
            torch.set_num_threads(self.fixed)

    def _sample(self) -> tuple[float, float, float] | None:
        machine = _machine_busy_s(self.include_niced)
        if machine is None:
            return None
        return time.monotonic(), machine, _own_busy_s()

    def start(self) -> int:
        """Set the thread count for a heavy call about to run (judged from the previous call's
        window) and open this call's window; returns the count."""
        if self.fixed is not None:
            return self.fixed
        if self._first:  # nothing measured yet: a short look at the machine first
            self._first = False
            self._started = self._sample()
            time.sleep(_MIN_WINDOW_S)
            self.stop()
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        self._started = self._sample()
        return self.threads

    def tick(self) -> None:
        """Inside a long call (each decoding step, each micro-batch): re-judge once a window
        of :data:`_TICK_S` has passed, so load that starts or ends mid-call is followed."""
        begun = self._started
        if self.fixed is not None or begun is None or time.monotonic() - begun[0] < _TICK_S:
            return
        self.stop()
        self.start()

    def stop(self) -> None:
        """Close the window: how busy the other processes kept the CPUs while the call ran
        decides the next call's count (a window under 0.25 s is too short to judge by)."""
        begun, self._started = self._started, None
        now = self._sample() if begun is not None else None
        if begun is None or now is None or now[0] - begun[0] < _MIN_WINDOW_S:
            return
        others = max(0.0, (now[1] - begun[1]) - (now[2] - begun[2])) / (now[0] - begun[0])
        self.threads = max(1, min(self.cpus, int(self.cpus - others + 0.3)))

    @contextlib.contextmanager
    def governing(self) -> Iterator[int]:
        """``start()`` ... ``stop()`` around a heavy call."""
        threads = self.start()
        try:
            yield threads
        finally:
            self.stop()
