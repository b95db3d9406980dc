"""A pool of warm, never-used workers, so an isolated environment is ready in milliseconds.

Starting a worker (bubblewrap, an interpreter, preloading the allowed modules) is the slow
part. Where the backend offers a fork server (`start_zygote`, the process backend does),
the pool starts one zygote and forks each worker from it, which costs about a millisecond;
otherwise it starts workers one by one. A background thread keeps `size` workers waiting.
Each worker still serves exactly one environment source: `open_env` takes a spare (or makes
one when none is ready), loads the source into it, and the thread makes a replacement. A
worker never passes to another source: after a fatal error or `recycle_after_episodes`
episodes the environment moves to a fresh one (`SandboxedEnv.renew` may construct the same
source again in a healthy worker). `close()` kills the spares, every environment the pool
opened and the zygote, and reaps them all.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref

from .environment import SandboxedEnv
from .errors import InfrastructureError, SandboxError
from .limits import SandboxConfig
from .protocol import WorkerHandle, check_layers, get_backend, start_worker
from .result import ExecResult
from .script import run_script

log = logging.getLogger("spade_sandbox")

REFILL_PAUSE_S = 0.05
"""While spares remain, refilling waits this long after a take, so starting a replacement
does not compete (CPU, GIL) with the environment that was just opened."""


def _usable(worker: WorkerHandle) -> bool:
    """A spare still alive, and its fork server (if any) too."""
    zygote = getattr(worker, "zygote", None)
    return worker.alive and (zygote is None or zygote.alive)


class SandboxPool:
    """`size` warm workers for one `SandboxConfig`; `open_env` and `run` as the module functions."""

    def __init__(self, config: SandboxConfig | None = None, size: int = 2) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size must be an integer >= 0, got {size!r}")
        self.config = SandboxConfig.from_env() if config is None else config
        self.size = size
        self._spares: collections.deque[WorkerHandle] = collections.deque()
        self._envs: weakref.WeakSet[SandboxedEnv] = weakref.WeakSet()
        self._cond = threading.Condition()
        self._closed = False
        self._last_take = 0.0
        self._zygote = None
        self._zygote_lock = threading.Lock()
        self._use_zygote = hasattr(get_backend(self.config.backend), "start_zygote")
        self._filler = threading.Thread(target=self._fill, name="spade-sandbox-pool", daemon=True)
        if size:
            self._filler.start()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    quiet = time.monotonic() - self._last_take
                    if len(self._spares) >= self.size:
                        self._cond.wait()
                    elif self._spares and quiet < REFILL_PAUSE_S:
                        self._cond.wait(REFILL_PAUSE_S - quiet)
                    else:
                        break
                if self._closed:
                    return
            try:
                worker = self._make_worker()
            except Exception as exc:  # the thread must live on; take_worker() reports it
                log.warning("spade-sandbox pool: could not start a worker: %s", exc)
                with self._cond:
                    self._cond.wait(1.0)  # back off; take() starts one itself meanwhile
                continue
            with self._cond:
                if self._closed:
                    worker.close()
                    return
                self._spares.append(worker)
                self._cond.notify_all()

    def _make_worker(self) -> WorkerHandle:
        if not self._use_zygote:
            return start_worker(self.config)
        with self._zygote_lock:
            if self._closed:
                raise InfrastructureError("this SandboxPool is closed")
            if self._zygote is None or not self._zygote.alive:
                if self._zygote is not None:
                    self._zygote.close()
                    self._zygote = None
                try:
                    backend = get_backend(self.config.backend)
                    self._zygote = backend.start_zygote(self.config)  # type: ignore[attr-defined]
                except SandboxError as exc:
                    log.warning(
                        "spade-sandbox pool: no fork server (%s); starting workers one by one", exc
                    )
                    self._use_zygote = False
            zygote = self._zygote
        if zygote is None:
            return start_worker(self.config)
        return check_layers(zygote.fork_worker(), self.config)

    def take_worker(self) -> WorkerHandle:
        """A started worker: a warm spare when one is ready, else a freshly started one."""
        with self._cond:
            if self._closed:
                raise InfrastructureError("this SandboxPool is closed")
            worker = self._spares.popleft() if self._spares else None
            stale = []
            while worker is not None and not _usable(worker):
                stale.append(worker)
                worker = self._spares.popleft() if self._spares else None
            self._last_take = time.monotonic()
            self._cond.notify_all()
        for dead in stale:  # forked by a fork server that has died since
            dead.close()
        return worker if worker is not None else self._make_worker()

    @property
    def ready(self) -> int:
        """How many warm workers are waiting now."""
        with self._cond:
            return len(self._spares)

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Block until all `size` spares are started (benchmarks, tests); False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or len(self._spares) >= self.size, timeout_s
            )

    def open_env(
        self,
        source: str,
        class_name: str | None = None,
        kwargs: dict | None = None,
        config: SandboxConfig | None = None,
    ) -> SandboxedEnv:
        """As `spade_sandbox.open_env`, on a warm worker; `config` must be None or the pool's."""
        if config is not None and config != self.config:
            raise ValueError("a SandboxPool serves one config; open a second pool for another one")
        env = SandboxedEnv(source, class_name, kwargs, self.config, self.take_worker)
        with self._cond:
            self._envs.add(env)
        return env

    def run(self, script_source: str, stdin: str = "") -> ExecResult:
        """As `spade_sandbox.run`, on a warm worker."""
        return run_script(self.take_worker(), script_source, self.config, stdin)

    def close(self) -> None:
        """Kill the spares and close every environment this pool opened; idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            spares = list(self._spares)
            self._spares.clear()
            envs = list(self._envs)
            self._cond.notify_all()
        if self._filler.is_alive():
            self._filler.join(timeout=30)
        for worker in spares:
            worker.close()
        for env in envs:
            env.close()
        with self._zygote_lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
