"""The worker behind a `SandboxedEnv` (environment.py): loading the source into a fresh worker,
renewing the environment in the same worker when that is safe, and closing it. The calls of
an episode (reset, step, call, snapshot, restore) are `SandboxedEnv`'s own."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Self

from .budget import EpisodeBudget
from .errors import InfrastructureError, ReasonCode, SandboxError, error_for
from .limits import SandboxConfig
from .protocol import WorkerHandle

RENEW_MAX_CPU_FRACTION = 0.05
"""`SandboxedEnv.renew` reuses a worker only while it has used at most this share of
`Limits.cpu_s` (RLIMIT_CPU covers a worker's whole life), so the next episode keeps nearly the
CPU budget a fresh worker gives it; past it, the environment moves to a fresh worker."""


def check_plain_json(value: object, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} must be JSON data (str, number, bool, None, list, dict): {exc}"
        ) from None


class _WorkerSlot:
    """The worker an environment holds now; what its finalizer closes."""

    __slots__ = ("worker",)

    def __init__(self) -> None:
        self.worker: WorkerHandle | None = None


def _close_slot(slot: _WorkerSlot) -> None:
    """Close the worker of an environment that was never closed (collected, or at exit)."""
    worker, slot.worker = slot.worker, None
    if worker is not None:
        worker.close()


class WorkerLifecycle:
    """The worker side of a `SandboxedEnv`: which worker serves the environment, whether it may
    be reused (`reusable`, `renew`), and closing it. Not used on its own."""

    def __init__(
        self,
        source: str,
        class_name: str | None,
        kwargs: dict | None,
        config: SandboxConfig,
        worker_source: Callable[[], WorkerHandle],
    ) -> None:
        if not isinstance(source, str):
            raise TypeError(f"source must be a str of Python code, got {type(source).__name__}")
        if class_name is not None and not isinstance(class_name, str):
            raise TypeError(f"class_name must be a str or None, got {type(class_name).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"kwargs must be a dict or None, got {type(kwargs).__name__}")
        check_plain_json(kwargs or {}, "kwargs")
        self.config = config
        self.source = source
        self.kwargs = dict(kwargs or {})
        self.requested_class = class_name
        self.class_name: str | None = None
        self._worker_source = worker_source
        self._slot = _WorkerSlot()
        # Holds the slot, never self: an environment nobody closed has its worker closed when
        # it is collected or, at the latest, when the interpreter exits.
        self._finalizer = weakref.finalize(self, _close_slot, self._slot)
        self._failure: SandboxError | None = None
        self._closed = False
        self._budget = EpisodeBudget(config.limits)
        self._episodes_on_worker = 0
        self._tainted = False  # a call failed since the worker was loaded: never renewed in it
        self._pending: Callable[[], object] | None = None  # a step or reset sent, not collected
        self._renewing: tuple[WorkerHandle, object] | None = None  # a reopen sent (start_renew)
        self.episodes = 0
        """Episodes started (`reset` calls that succeeded) over this object's life."""
        self._load()

    def _load(self) -> None:
        # An infrastructure fault (a warm worker whose pool's fork server died) is retried once
        # on a fresh worker: the pool restarts its fork server when the next worker is made.
        for attempt in (1, 2):
            worker = self._worker_source()
            try:
                value = worker.request(
                    {
                        "op": "open",
                        "source": self.source,
                        "class_name": self.requested_class,
                        "kwargs": self.kwargs,
                    },
                    self.config.limits.call_wall_s,
                    self.config.limits.max_output_bytes,
                )
            except InfrastructureError:
                worker.close()
                if attempt == 2:
                    raise
                continue
            except BaseException:
                worker.close()
                raise
            break
        if not isinstance(value, dict) or not isinstance(value.get("class_name"), str):
            worker.close()
            raise error_for(ReasonCode.PROTOCOL_ERROR, "the worker's open reply is malformed")
        self.class_name = value["class_name"]
        self._worker = worker
        self._failure = None
        self._episodes_on_worker = 0
        self._tainted = False

    @property
    def _worker(self) -> WorkerHandle | None:
        return self._slot.worker

    @_worker.setter
    def _worker(self, worker: WorkerHandle | None) -> None:
        self._slot.worker = worker

    @property
    def layers(self) -> dict[str, str]:
        """The isolation layers of the current worker (name -> state)."""
        return dict(self._worker.layers) if self._worker else {}

    @property
    def work_dir(self) -> str | None:
        """The current worker's private work directory on the host."""
        return self._worker.work_dir if self._worker else None

    def close(self) -> None:
        """Close the environment and reap its worker; calling it again does nothing."""
        if self._closed:
            return
        self._finish_renew(load=False)
        self._settle()
        self._closed = True
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def reusable(self) -> bool:
        """Whether `renew()` would keep the current worker: open, alive, no call has failed
        on it since it was loaded, and under `SandboxConfig.recycle_after_episodes`."""
        recycle = self.config.recycle_after_episodes
        return (
            not self._closed
            and self._worker is not None
            and self._worker.alive
            and not self._tainted
            and self._pending is None
            and self._renewing is None
            and not (recycle and self._episodes_on_worker >= recycle)
        )

    def renew(self) -> bool:
        """Replace the environment with a freshly constructed one, as `open_env` would give:
        the worker closes the old instance, drops its module, empties its work dir, reseeds
        `random`, runs the source again in a new module and constructs the class with the same
        kwargs. That happens in the same worker (True) when it is `reusable` and has used at
        most `RENEW_MAX_CPU_FRACTION` of `Limits.cpu_s`; otherwise the source is loaded into
        a fresh worker (False), as at opening. Episodes on a kept worker still count towards
        `recycle_after_episodes`. What an environment changes in the standard-library modules
        it imports stays for its next instances in the same worker (never another
        environment's: a worker only ever runs one source)."""
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        value = None
        if self.reusable:
            assert self._worker is not None
            limits = self.config.limits
            try:
                value = self._worker.request(
                    self._reopen_message(), limits.call_wall_s, limits.max_output_bytes
                )
            except SandboxError:  # the worker is closed below; a fresh one gets the source
                value = None
        return self._renewed(value)

    def start_renew(self) -> None:
        """`renew()` without waiting for the worker: the request goes out now and the next
        call (normally `reset`, or `start_reset`) waits for it, moving to a fresh worker when
        the kept one could not be renewed, as `renew` does. Sending to many kept workers
        before resetting any lets them rebuild their environments at once."""
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        send = getattr(self._worker, "send", None)
        if not self.reusable or send is None:
            self.renew()
            return
        assert self._worker is not None
        try:
            call = send(self._reopen_message(), self.config.limits.call_wall_s)
        except SandboxError:
            self._renewed(None)
            return
        self._renewing = (self._worker, call)
        self._budget.started = None

    def _reopen_message(self) -> dict:
        return {"op": "reopen", "max_cpu_s": self.config.limits.cpu_s * RENEW_MAX_CPU_FRACTION}

    def _renewed(self, value: object) -> bool:
        """Finish a renew from the worker's reply to `reopen` (None: no usable reply)."""
        reused = (
            isinstance(value, dict)
            and value.get("reopened") is True
            and value.get("class_name") == self.class_name
        )
        if not reused:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
            self._load()
        self._budget.clear()
        return reused

    def _finish_renew(self, load: bool = True) -> None:
        """Wait for a `start_renew` in flight; `load=False` (closing): only free the worker."""
        renewing, self._renewing = self._renewing, None
        if renewing is None:
            return
        worker, call = renewing
        try:
            value = worker.receive(call, self.config.limits.max_output_bytes)  # type: ignore[attr-defined]
        except SandboxError:
            value = None
        if load:
            self._renewed(value)

    def _settle(self) -> None:
        """Finish a `start_renew` in flight; collect a step or reset sent by `start_step` /
        `start_reset` and never collected (its outcome is dropped, and the worker is not
        renewed: nobody saw what the call did)."""
        self._finish_renew()
        pending = self._pending
        if pending is not None:
            self._tainted = True
            try:
                pending()
            except Exception:
                pass
