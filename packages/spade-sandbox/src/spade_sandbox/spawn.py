"""Every sandbox process is started from one long-lived thread (see :class:`_Spawner`)."""

from __future__ import annotations

import concurrent.futures
import os
import queue
import subprocess
import threading

__all__ = ["spawn"]


class _Spawner:
    """Starts every sandbox process from one long-lived thread.

    A child's parent-death signal (bubblewrap's --die-with-parent, the worker's
    PR_SET_PDEATHSIG) follows the *thread* that forked it: a worker opened from a short-lived
    thread would die when that thread exits. Forking from a thread that lives as long as the
    process ties the worker to the process instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _serve(self) -> None:
        while True:
            fn, done = self._queue.get()
            try:
                done.set_result(fn())
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)

    def call(self, fn):
        if threading.current_thread() is self._thread:
            return fn()
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._queue = queue.SimpleQueue()  # a forked host starts afresh
                self._thread = threading.Thread(
                    target=self._serve, name="spade-sandbox-spawner", daemon=True
                )
                self._pid = os.getpid()
                self._thread.start()
            done: concurrent.futures.Future = concurrent.futures.Future()
            self._queue.put((fn, done))
        return done.result()


_SPAWNER = _Spawner()


def spawn(argv: list[str], **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen(argv, ...)` forked from the process-long spawner thread."""
    return _SPAWNER.call(lambda: subprocess.Popen(argv, **popen_kwargs))
