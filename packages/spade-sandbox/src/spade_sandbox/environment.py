"""Sandboxed environments and one-off scripts: the public calls most users need.

`open_env(source)` starts a worker (or takes a warm one from a `SandboxPool`), loads the
source in it and returns a `SandboxedEnv` whose `reset`/`step`/`call` cross the process
boundary under `Limits`. Every failure is a `SandboxError` with a reason code; values are
checked on both sides. `run(script)` executes a one-off script and returns an `ExecResult`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from . import wire
from .errors import (
    BadReturn,
    InfrastructureError,
    LimitExceeded,
    OutputTooLarge,
    ReasonCode,
    SandboxError,
    SandboxTimeout,
    error_for,
)
from .limits import SandboxConfig
from .protocol import WorkerHandle, get_backend

_T = TypeVar("_T")

log = logging.getLogger("spade_sandbox")

RENEW_MAX_CPU_FRACTION = 0.05
"""`SandboxedEnv.renew` reuses a worker only while it has used at most this share of
`Limits.cpu_s` (RLIMIT_CPU covers a worker's whole life), so the next episode keeps nearly the
CPU budget a fresh worker gives it; past it, the environment moves to a fresh worker."""
_warned: set[str] = set()
_warned_lock = threading.Lock()


def start_worker(config: SandboxConfig) -> WorkerHandle:
    """A fresh worker from the configured backend, with `require_layers` enforced and every
    other missing layer logged once per process."""
    return check_layers(get_backend(config.backend).start(config), config)


def check_layers(worker: WorkerHandle, config: SandboxConfig) -> WorkerHandle:
    """Refuse (close) a worker missing a required layer; log other missing layers once."""
    inactive = {
        name: state for name, state in worker.layers.items() if not state.startswith("active")
    }
    missing = sorted(
        n for n in config.require_layers if not worker.layers.get(n, "").startswith("active")
    )
    if missing:
        worker.close()
        details = "; ".join(
            f"{name}: {inactive.get(name, 'not reported by the backend')}" for name in missing
        )
        raise InfrastructureError(
            f"required isolation layer(s) not active ({details}); run `spade-sandbox doctor`"
        )
    with _warned_lock:
        for name, state in sorted(inactive.items()):
            if name not in _warned:
                _warned.add(name)
                log.warning(
                    "spade-sandbox: isolation layer %s is %s; continuing without it", name, state
                )
    return worker


def _check_plain_json(value: object, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} must be JSON data (str, number, bool, None, list, dict): {exc}"
        ) from None


class SandboxedEnv:
    """An environment running in its own sandboxed worker; use it like the environment itself.

    `reset(seed)` -> (observation, info); `step(action)` -> (observation, reward, terminated,
    truncated, info); `call(name, *args)` calls another public method with JSON arguments;
    `snapshot(key)` / `restore(key)` start an episode again from a copy of a reset's state.
    Per-call wall time is `Limits.call_wall_s`; an episode (from `reset`) may take
    `Limits.max_steps` steps and spend `Limits.episode_wall_s` seconds in its own calls (time
    between calls, the agent's, does not count). After a fatal error the
    worker is gone: the next `reset()` loads the source into a fresh one, as it also does
    every `SandboxConfig.recycle_after_episodes` episodes. `renew()` replaces the instance
    with a freshly constructed one, in the same worker when that is safe (`reusable`).
    Close it (or use `with`).
    """

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
        _check_plain_json(kwargs or {}, "kwargs")
        self.config = config
        self.source = source
        self.kwargs = dict(kwargs or {})
        self.requested_class = class_name
        self.class_name: str | None = None
        self._worker_source = worker_source
        self._worker: WorkerHandle | None = None
        self._failure: SandboxError | None = None
        self._closed = False
        self._episode_started: float | None = None
        self._episode_used = 0.0
        self._steps = 0
        self._episodes_on_worker = 0
        self._tainted = False  # a call failed since the worker was loaded: never renewed in it
        self._pending: Callable[[], object] | None = None  # a step or reset sent, not collected
        self._renewing: tuple[WorkerHandle, object] | None = None  # a reopen sent (start_renew)
        self.episodes = 0
        """Episodes started (`reset` calls that succeeded) over this object's life."""
        self._load()

    # -- lifecycle ---------------------------------------------------------------------
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

    def __enter__(self) -> SandboxedEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

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
        self._episode_started = None

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
        self._episode_started = None
        self._episode_used = 0.0
        self._steps = 0
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

    # -- calls -------------------------------------------------------------------------
    def _live_worker(self) -> WorkerHandle:
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        if self._worker is None or not self._worker.alive:
            failure = self._failure
            raise error_for(
                failure.reason if failure else ReasonCode.PROTOCOL_ERROR,
                f"the environment's worker is gone after an earlier failure ({failure}); call reset() to start a fresh one",
            )
        return self._worker

    def _guarded(self, worker: WorkerHandle, fn: Callable[..., _T], *args: object) -> _T:
        """`fn(*args)` on `worker`; a sandbox error taints it (and closes it when it died)."""
        try:
            return fn(*args)
        except SandboxError as exc:
            self._tainted = True
            if not worker.alive:
                self._failure = exc
                worker.close()
            raise

    def _request(self, message: dict, timeout_s: float, reply_cap: int) -> object:
        worker = self._live_worker()
        return self._guarded(worker, worker.request, message, timeout_s, reply_cap)

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

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        """Start an episode; returns (observation, info)."""
        return self.start_reset(seed)()

    def start_reset(self, seed: int | None = None) -> Callable[[], tuple[str, dict]]:
        """`reset` sent now and collected by calling the result (see `start_step`)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        recycle = self.config.recycle_after_episodes
        if (
            self._worker is None
            or not self._worker.alive
            or (recycle and self._episodes_on_worker >= recycle)
        ):
            if self._worker is not None:
                self._worker.close()
                self._worker = None
            self._load()
        limits = self.config.limits
        self._episode_started = None
        started = time.monotonic()
        message = {"op": "reset", "seed": seed}
        worker = self._live_worker()
        send = getattr(worker, "send", None)
        if send is None:
            value = self._reset_request(message)
            return lambda: self._reset_value(value, started)
        try:
            call = self._guarded(worker, send, message, limits.call_wall_s)
        except InfrastructureError:
            value = self._reset_request(message, retry=True)
            return lambda: self._reset_value(value, started)

        def collect() -> tuple[str, dict]:
            if self._pending is not collect:
                raise ValueError("this reset was collected already")
            self._pending = None
            receive = worker.receive  # type: ignore[attr-defined]
            try:
                got = self._guarded(worker, receive, call, limits.max_output_bytes)
            except InfrastructureError:
                got = self._reset_request(message, retry=True)
            return self._reset_value(got, started)

        self._pending = collect
        return collect

    def _reset_request(self, message: dict, retry: bool = False) -> object:
        limits = self.config.limits
        if not retry:
            try:
                return self._request(message, limits.call_wall_s, limits.max_output_bytes)
            except InfrastructureError:
                pass
        # The worker was lost to the sandbox (a fork server died, an outside kill): a new
        # episode may start on a fresh one; a second fault is reported.
        self._worker = None
        self._load()
        return self._request(message, limits.call_wall_s, limits.max_output_bytes)

    def _reset_value(self, value: object, started: float) -> tuple[str, dict]:
        limits = self.config.limits
        try:
            obs, info = wire.check_reset(value, limits.max_output_bytes, decoded=True)
        except wire.ValueCheckError as exc:
            self._tainted = True
            raise (OutputTooLarge if exc.kind == "output_too_large" else BadReturn)(
                str(exc)
            ) from None
        self._episode_started = time.monotonic()
        self._episode_used = self._episode_started - started  # the reset's own time counts
        self._steps = 0
        self._episodes_on_worker += 1
        self.episodes += 1
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Take one action; returns (observation, reward, terminated, truncated, info)."""
        worker, timeout, started = self._step_budget(action)
        message = {"op": "step", "action": action}
        args = (message, timeout, self.config.limits.max_output_bytes)
        return self._step_value(self._timed_step(worker, worker.request, args, timeout, started))

    def start_step(self, action: str) -> Callable[[], tuple[str, float, bool, bool, dict]]:
        """Send one action without waiting for it: calling what this returns waits for the
        step and returns (or raises) what `step` would. Sending to many environments before
        collecting from any lets their workers run at once, with no thread per environment.
        Until the step is collected this environment takes no other call (one that comes
        first collects it and drops its outcome). The episode's wall budget counts the time
        from the send to the collection."""
        worker, timeout, started = self._step_budget(action)
        message = {"op": "step", "action": action}
        cap = self.config.limits.max_output_bytes
        send = getattr(worker, "send", None)
        if send is None:  # a handle without the two halves: the whole call now
            value = self._timed_step(worker, worker.request, (message, timeout, cap), timeout,
                                     started)  # fmt: skip
            return lambda: self._step_value(value)
        call = self._timed_step(worker, send, (message, timeout), timeout, started, last=False)

        def collect() -> tuple[str, float, bool, bool, dict]:
            if self._pending is not collect:
                raise ValueError("this step was collected already")
            self._pending = None
            receive = worker.receive  # type: ignore[attr-defined]
            return self._step_value(
                self._timed_step(worker, receive, (call, cap), timeout, started)
            )

        self._pending = collect
        return collect

    def _step_budget(self, action: str) -> tuple[WorkerHandle, float, float]:
        """Check a step may be taken; (worker, its timeout, start time), the step counted."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str, got {type(action).__name__}")
        if self._episode_started is None:
            raise ValueError("call reset() before step()")
        limits = self.config.limits
        if self._steps >= limits.max_steps:
            self._tainted = True
            raise LimitExceeded(
                f"the episode reached Limits.max_steps={limits.max_steps}; call reset()"
            )
        left = limits.episode_wall_s - self._episode_used
        if left <= 0:
            self._tainted = True
            raise LimitExceeded(
                f"the episode ran past Limits.episode_wall_s={limits.episode_wall_s:g}; call reset()"
            )
        self._steps += 1
        return self._live_worker(), min(limits.call_wall_s, left), time.monotonic()

    def _timed_step(
        self, worker: WorkerHandle, fn: Callable[..., _T], args: tuple, timeout: float,
        started: float, last: bool = True,
    ) -> _T:  # fmt: skip
        """One half of a step (`fn(*args)`); its time counts once the step is over or failed."""
        done = False
        try:
            out = self._guarded(worker, fn, *args)
            done = True
            return out
        except SandboxTimeout:
            if timeout < self.config.limits.call_wall_s:
                raise LimitExceeded(
                    f"step ran past the episode's budget, Limits.episode_wall_s={self.config.limits.episode_wall_s:g}"
                ) from None
            raise
        finally:
            if last or not done:
                self._episode_used += time.monotonic() - started

    def _step_value(self, value: object) -> tuple[str, float, bool, bool, dict]:
        try:
            obs, reward, terminated, truncated, info = wire.check_step(
                value, self.config.limits.max_output_bytes, decoded=True
            )
        except wire.ValueCheckError as exc:
            self._tainted = True
            raise (OutputTooLarge if exc.kind == "output_too_large" else BadReturn)(
                str(exc)
            ) from None
        return obs, reward, terminated, truncated, info

    def snapshot(self, key: str) -> bool:
        """Keep, in the worker, a copy of the state the last `reset` left, under `key`.

        For callers that reset the same seed many times (the contract checker): `restore(key)`
        then starts an episode from a copy instead of running `reset` again. Only plain data is
        copied (builtin and `collections` containers, `random.Random`, instances of classes
        without copy or attribute hooks; with the module's globals, its classes' data and the
        `random` module's state) and none of the environment's code runs while copying. False
        when the state holds anything else: then keep calling `reset`."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, got {type(key).__name__}")
        if self._episode_started is None or self._steps:
            raise ValueError("snapshot() keeps the state right after reset(); call reset() first")
        limits = self.config.limits
        value = self._request(
            {"op": "snapshot", "key": key}, limits.call_wall_s, limits.max_output_bytes
        )
        return value is True

    def restore(self, key: str) -> bool:
        """Start an episode from a fresh copy of the state kept by `snapshot(key)`, as `reset`
        would (same budget, counts as an episode). False, with nothing changed, when this
        worker keeps no such state (a new worker after a failure or a recycle): call `reset`."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, got {type(key).__name__}")
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        recycle = self.config.recycle_after_episodes
        if (
            self._worker is None
            or not self._worker.alive
            or (recycle and self._episodes_on_worker >= recycle)
        ):
            return False
        limits = self.config.limits
        started = time.monotonic()
        value = self._request(
            {"op": "restore", "key": key}, limits.call_wall_s, limits.max_output_bytes
        )
        if value is not True:
            return False
        self._episode_started = time.monotonic()
        self._episode_used = self._episode_started - started
        self._steps = 0
        self._episodes_on_worker += 1
        self.episodes += 1
        return True

    def call(self, method: str, *args: object) -> object:
        """Call the environment's public method `method` with JSON arguments; JSON result."""
        if not isinstance(method, str) or not method.isidentifier() or method.startswith("_"):
            raise ValueError(f"method must be the name of a public method, got {method!r}")
        _check_plain_json(list(args), "call() arguments")
        limits = self.config.limits
        return self._request(
            {"op": "call", "method": method, "args": list(args)},
            limits.call_wall_s,
            limits.max_output_bytes,
        )

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else ("ready" if self._worker and self._worker.alive else "failed")
        )
        return f"<SandboxedEnv {self.class_name} {state}>"


def open_env(
    source: str,
    class_name: str | None = None,
    kwargs: dict | None = None,
    config: SandboxConfig | None = None,
) -> SandboxedEnv:
    """Load environment source into a fresh sandboxed worker and construct it with `kwargs`.

    `class_name=None` picks the single class whose name ends in "Env". `config=None` reads
    `SandboxConfig.from_env()`. For many environments use a `SandboxPool` (warm workers)."""
    config = SandboxConfig.from_env() if config is None else config
    return SandboxedEnv(source, class_name, kwargs, config, lambda: start_worker(config))
