"""Sandboxed environments and one-off scripts: the public calls most users need.

`open_env(source)` starts a worker (or takes a warm one from a `SandboxPool`), loads the
source in it and returns a `SandboxedEnv` whose `reset`/`step`/`call` cross the process
boundary under `Limits`. Every failure is a `SandboxError` with a reason code; values are
checked on both sides. `run(script)` executes a one-off script and returns an `ExecResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
from .lifecycle import WorkerLifecycle, check_plain_json
from .limits import SandboxConfig
from .protocol import WorkerHandle, start_worker

_T = TypeVar("_T")
StepTuple = tuple[str, float, bool, bool, dict]


class SandboxedEnv(WorkerLifecycle):
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
        self._budget.started = None
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
        self._budget.begin(started)
        self._episodes_on_worker += 1
        self.episodes += 1
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Take one action; returns (observation, reward, terminated, truncated, info)."""
        worker, timeout, started = self._step_budget(action)
        message = {"op": "step", "action": action}
        args = (message, timeout, self.config.limits.max_output_bytes)
        return self._step_value(self._timed_step(worker, worker.request, args, timeout, started))

    def step_many(
        self, actions: Sequence[str], expect: str | None = None, restore: str | None = None
    ) -> tuple[list[StepTuple], Exception | None] | None:
        """Take ``actions`` in order in one call to the worker, stopping after the step that
        ends the episode: the results of the steps taken, and the error the next step raised
        (None when none did). Each step is what `step` would do, with the same checks and
        budget; the call's time limit is the steps' together (``Limits.call_wall_s`` each,
        within the episode's budget), so a step that hangs is stopped later than alone.

        For callers that choose actions before reading the replies (the contract checker's
        probes and replays): one round trip instead of one per step. ``expect``: an action
        after the first was chosen expecting the observation ``expect`` before it; the worker
        stops before the first action whose expectation failed (fewer results, no error).
        ``restore``: the call first starts an episode from the state `snapshot(restore)` kept
        (as `restore` would, in the same round trip); None, with no step taken, when this
        worker keeps no such state: call `reset` and step again."""
        actions = list(actions)
        if not actions or len(actions) > wire.MAX_BATCH_STEPS:
            raise ValueError(f"step_many takes 1 to {wire.MAX_BATCH_STEPS} actions")
        if not all(isinstance(a, str) for a in actions) or not isinstance(
            restore, (str, type(None))
        ):
            raise TypeError("every action and the restore key must be a str")
        limits = self.config.limits
        if restore is not None:
            if not self._can_restore():
                return None
            self._budget.begin(time.monotonic())  # the call's restore starts the episode
            self._episodes_on_worker += 1
            self.episodes += 1
        worker, timeout, started = self._step_budget(actions[0])
        if restore is not None:
            timeout = min(timeout + limits.call_wall_s, limits.episode_wall_s)
        stop: Exception | None = None
        for n in range(1, len(actions)):  # the steps the episode's budget allows
            try:
                self._budget.take_step()
            except LimitExceeded as exc:  # raised only if the episode gets that far
                actions, stop = actions[:n], exc
                break
            timeout = min(timeout + limits.call_wall_s, limits.episode_wall_s - self._budget.used)
        message: dict = {"op": "steps", "actions": actions, "expect": expect, "restore": restore}
        return self._steps_call(worker, message, timeout, started, stop)

    def _steps_call(
        self, worker: WorkerHandle, message: dict, timeout: float, started: float,
        stop: Exception | None,
    ) -> tuple[list[StepTuple], Exception | None] | None:  # fmt: skip
        actions, expect = message["actions"], message["expect"]
        cap = len(actions) * self.config.limits.max_output_bytes
        try:
            raw = self._timed_step(worker, worker.request, (message, timeout, cap), timeout,
                                   started)  # fmt: skip
        except SandboxError as exc:
            done = [self._step_value(v) for v in (exc.stepped or [])[: len(actions) - 1]]
            self._budget.steps -= len(actions) - len(done) - 1
            return done, exc
        if message["restore"] is not None and raw == {"restored": False}:
            self._budget.clear()
            self._episodes_on_worker -= 1
            self.episodes -= 1
            return None
        if not isinstance(raw, list) or not 0 < len(raw) <= len(actions):
            self._tainted = True
            raise BadReturn(f"the steps reply is not a list of results: {str(raw)[:80]}")
        done = [self._step_value(v) for v in raw]
        stopped = done[-1][2] or done[-1][3] or (expect is not None and done[-1][0] != expect)
        if any(r[2] or r[3] for r in done[:-1]) or (len(done) < len(actions) and not stopped):
            self._tainted = True
            raise BadReturn("the steps reply does not stop where the episode ended")
        self._budget.steps -= len(actions) - len(done)
        if stop is not None and len(done) == len(actions) and not (done[-1][2] or done[-1][3]):
            self._tainted = True  # as `step` past the budget
            return done, stop
        return done, None

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
        try:
            timeout = self._budget.take_step()
        except LimitExceeded:
            self._tainted = True
            raise
        return self._live_worker(), timeout, time.monotonic()

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
                self._budget.spend(time.monotonic() - started)

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
        if self._budget.started is None or self._budget.steps:
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
        if not self._can_restore():
            return False
        limits = self.config.limits
        started = time.monotonic()
        value = self._request(
            {"op": "restore", "key": key}, limits.call_wall_s, limits.max_output_bytes
        )
        if value is not True:
            return False
        self._budget.begin(started)
        self._episodes_on_worker += 1
        self.episodes += 1
        return True

    def _can_restore(self) -> bool:
        """Whether this worker may still hold kept states (not replaced, not due a recycle)."""
        if self._closed:
            raise ValueError("this environment is closed; open a new one")
        self._settle()
        recycle = self.config.recycle_after_episodes
        return not (
            self._worker is None
            or not self._worker.alive
            or (recycle and self._episodes_on_worker >= recycle)
        )

    def twins(
        self, seed: int, turns: int, probes: list[str] | None = None, budget_s: float = 2.0,
        spread: int = 4,
    ) -> dict:  # fmt: skip
        """The indistinguishable-twins analysis of `seed` (see `spade_sandbox.analyse_twins`),
        run in the worker in one call on a scratch instance of the environment's class: a dict
        whose "outcome" is "judged" (with "bound"), "untraced", "raised" or "budget". The
        environment's own instance and episode are left alone. `budget_s` is capped at a quarter
        of `Limits.call_wall_s` (which ends a call that runs past it): the analysis stops
        between resets when its budget is spent, and reports "budget"."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        probes = [p for p in (probes or []) if isinstance(p, str)]
        limits = self.config.limits
        budget = max(0.1, min(budget_s, limits.call_wall_s / 4))
        message = {
            "op": "twins",
            "seed": seed,
            "turns": turns,
            "probes": probes,
            "spread": spread,
            "budget_s": budget,
        }
        value = self._request(message, limits.call_wall_s, limits.max_output_bytes)
        if not isinstance(value, dict) or not isinstance(value.get("outcome"), str):
            self._tainted = True
            raise BadReturn(f"the twins reply is not an outcome: {str(value)[:80]}")
        return value

    def call(self, method: str, *args: object) -> object:
        """Call the environment's public method `method` with JSON arguments; JSON result."""
        if not isinstance(method, str) or not method.isidentifier() or method.startswith("_"):
            raise ValueError(f"method must be the name of a public method, got {method!r}")
        check_plain_json(list(args), "call() arguments")
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
