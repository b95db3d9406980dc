"""Loading environment source: in-process (trusted code) or through spade-sandbox (untrusted).

In-process loading executes the module in this interpreter: use it only for code you trust
(the shipped corpora, your own environments). For generated code pass ``sandbox=True``; that
needs the optional ``spade-sandbox`` package (``pip install 'spade-envs[sandbox]'``) and goes
through its public interface only.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import threading
import types
from collections.abc import Callable
from typing import Any, cast

from .core import DEFAULT_MAX_TURNS, EnvFactory, StepResult
from .errors import SandboxUnavailableError, SourceError

__all__ = ["find_env_class", "load_env_class", "load_env", "SandboxedFactory"]


PARSE_LOCK = threading.RLock()
"""Serializes ``ast.parse`` in this process: CPython 3.11 before 3.11.8 can fail parsing in
several threads at once ("AST constructor recursion depth mismatch", gh-106905). Code that
parses environment sources from threads (spade-corpus validation) holds it too."""


@functools.lru_cache(maxsize=64)
def _top_level_classes(source: str) -> tuple[str, ...]:
    """The names of the top-level classes of ``source`` (cached: validation asks for the same
    source several times, and parsing a large one costs milliseconds). SyntaxError as ast."""
    with PARSE_LOCK:
        tree = ast.parse(source)
    return tuple(n.name for n in tree.body if isinstance(n, ast.ClassDef))


def find_env_class(source: str, class_name: str | None = None, origin: str = "<source>") -> str:
    """The name of the environment class in ``source``, checked without running it.

    With ``class_name`` given it must be defined at top level; otherwise there must be exactly
    one top-level class whose name ends in ``Env``.
    """
    try:
        names = _top_level_classes(source)
    except SyntaxError as exc:
        raise SourceError(f"{origin}: syntax error at line {exc.lineno}: {exc.msg}") from None
    if class_name is not None:
        if class_name not in names:
            raise SourceError(
                f"{origin}: no top-level class {class_name!r} (found: {', '.join(names) or 'none'})"
            )
        return class_name
    env_names = [n for n in names if n.endswith("Env")]
    if len(env_names) != 1:
        found = ", ".join(env_names) or "none"
        raise SourceError(
            f"{origin}: expected exactly one top-level class whose name ends in 'Env', "
            f"found {found}; pass class_name to choose one"
        )
    return env_names[0]


def load_env_class(source: str, class_name: str | None = None, origin: str = "<source>") -> type:
    """Execute trusted ``source`` in a fresh module and return its environment class."""
    name = find_env_class(source, class_name, origin)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    module = types.ModuleType(f"spade_env_{digest}")
    module.__file__ = origin
    try:
        exec(compile(source, origin, "exec"), module.__dict__)
    except Exception as exc:
        raise SourceError(
            f"{origin}: executing the module raised {type(exc).__name__}: {exc}"
        ) from exc
    cls = module.__dict__.get(name)
    if not isinstance(cls, type):
        raise SourceError(f"{origin}: {name!r} is not a class after executing the module")
    return cls


class _SandboxedEnvironment:
    """Gives a spade-sandbox environment handle the contract's method names; closing it hands
    the handle back to its factory (``release``) when that reuses workers."""

    def __init__(self, handle: Any, release: Callable[[Any], None] | None = None):
        self._handle = handle
        self._release = release
        self._closed = False

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        return self._live().reset(seed=seed)

    def step(self, action: str) -> StepResult:
        return self._live().step(action)

    @property
    def start_reset(self) -> Callable[[int | None], Callable[[], tuple[str, dict]]] | None:
        """The handle's send-now, collect-later reset (``SandboxedEnv.start_reset``), or None."""
        start = getattr(self._handle, "start_reset", None)
        return (lambda seed: self._live().start_reset(seed)) if callable(start) else None

    @property
    def start_step(self) -> Callable[[str], Callable[[], StepResult]] | None:
        """The handle's send-now, collect-later step (``SandboxedEnv.start_step``), or None
        for a handle without one (the episode runner then steps it whole, on a thread)."""
        start = getattr(self._handle, "start_step", None)
        return (lambda action: self._live().start_step(action)) if callable(start) else None

    def solution(self) -> str:
        return self._live().call("solution")

    def _step_many(
        self, actions: list[str], expect: str | None = None, restore: str | None = None
    ) -> tuple[list[StepResult], Exception | None] | None:
        """Several steps in one sandbox call (``SandboxedEnv.step_many``): the results of the
        steps taken, up to the one that ends the episode (or, with ``expect``, up to the
        first whose observation is not ``expect``), and the next step's error. ``restore``:
        first start from the state kept under that key (None when none is kept)."""
        return self._live().step_many(actions, expect, restore)  # type: ignore[no-any-return]

    def _keep_reset(self, key: str) -> bool:
        """Ask the worker to keep the state the last reset left under ``key`` (check_env)."""
        return bool(self._live().snapshot(key))

    def _reset_from_kept(self, key: str) -> bool:
        """Start an episode from a copy of the kept state; False when none is kept."""
        return bool(self._live().restore(key))

    def _close_error(self) -> str | None:
        """Run the environment's own ``close()`` in its worker: what it raised, or None
        (check_env's ``close_raised``). Closing the handle runs it too but ignores its errors,
        since the worker is ended or renewed either way. Sandbox faults propagate."""
        try:
            self._live().call("close")
        except Exception as exc:
            if getattr(exc, "reason", None) != "env_exception":
                raise
            return str(getattr(exc, "message", exc))
        return None

    def _twins(
        self, seed: int, turns: int, probes: list[str], budget_s: float, spread: int
    ) -> dict:
        """The worker's twin analysis of ``seed`` (:mod:`spade_envs.feasibility`)."""
        twins = getattr(self._live(), "twins", None)
        if not callable(twins):
            return {"outcome": "untraced", "message": "this sandbox handle has no twins call"}
        return dict(twins(seed, turns, probes, budget_s, spread))

    def _live(self) -> Any:
        if self._closed:  # the handle may serve another episode by now
            raise ValueError("this environment is closed; open a new one")
        return self._handle

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._release is not None:
            self._release(self._handle)  # the factory keeps it for a later episode, or closes it
        else:
            self._handle.close()  # the handle also closes itself when dropped


class SandboxedFactory:
    """An :class:`EnvFactory` whose environments run inside spade-sandbox.

    ``config`` is a ``spade_sandbox.SandboxConfig`` (default: ``SandboxConfig.from_env()``);
    ``pool`` an optional ``spade_sandbox.SandboxPool`` to open environments from warm workers.

    Worker reuse (``reuse_workers``, on by default): closing an environment keeps its worker
    (up to ``max_idle`` of them) when nothing failed in it, and the next call with the same
    arguments gets it back with a freshly constructed environment
    (``spade_sandbox.SandboxedEnv.renew``: the source runs again in a new module, the work dir
    is emptied), which plays exactly as one in a new worker would, for a fraction of the cost.
    A worker on which any call failed, one past ``SandboxConfig.recycle_after_episodes``
    episodes, or one that has used a twentieth of its CPU limit is never reused. Handles without
    ``renew`` (a Ray sandbox pool's) are closed as before. ``close()`` ends the idle workers.
    """

    def __init__(
        self,
        source: str,
        class_name: str | None = None,
        config: Any = None,
        pool: Any = None,
        origin: str = "<source>",
        *,
        reuse_workers: bool = True,
        max_idle: int = 64,
    ):
        try:
            import spade_sandbox
        except ImportError:
            raise SandboxUnavailableError(
                "sandboxed loading needs spade-sandbox: pip install 'spade-envs[sandbox]'"
            ) from None
        self._sandbox = spade_sandbox
        self.source = source
        self.class_name = find_env_class(source, class_name, origin)
        self.config = config
        self.pool = pool
        if isinstance(max_idle, bool) or not isinstance(max_idle, int) or max_idle < 0:
            raise ValueError(f"max_idle must be an integer >= 0, got {max_idle!r}")
        self.reuse_workers = reuse_workers
        self.max_idle = max_idle
        self._idle: dict[str, list[Any]] = {}  # kwargs as JSON -> handles kept for reuse
        self._idle_count = 0
        self._lock = threading.Lock()
        self.reused = 0
        """Environments handed out on a kept worker (for benchmarks and tests; one whose
        deferred renew then fails moves to a fresh worker at its first call, still counted)."""

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> _SandboxedEnvironment:
        kwargs = {"max_turns": max_turns, **kwargs}
        key = _kwargs_key(kwargs) if self.reuse_workers and self.max_idle else None
        handle = self._take_idle(key) if key is not None else None
        if handle is not None and not handle.reusable:  # closed meanwhile (its pool closed)
            handle.close()
            handle = None
        if handle is not None:
            try:
                # start_renew returns at once (the next call on the handle waits for it), so
                # a round of episodes rebuilds its environments in their workers together
                start = getattr(handle, "start_renew", None)
                if callable(start):
                    start()
                    renewed = True
                else:
                    renewed = handle.renew()
                if renewed:
                    with self._lock:
                        self.reused += 1
            except BaseException:
                handle.close()
                raise
        else:
            opener = self.pool.open_env if self.pool is not None else self._sandbox.open_env
            handle = opener(
                self.source, class_name=self.class_name, kwargs=kwargs, config=self.config
            )
        if key is None or not callable(getattr(handle, "renew", None)):
            return _SandboxedEnvironment(handle)
        return _SandboxedEnvironment(handle, lambda h: self._keep(key, h))

    def _take_idle(self, key: str) -> Any:
        with self._lock:
            kept = self._idle.get(key)
            if not kept:
                return None
            self._idle_count -= 1
            return kept.pop()

    def _keep(self, key: str, handle: Any) -> None:
        """An environment's user closed it: keep its worker for the next one, or close it."""
        if getattr(handle, "reusable", False):
            with self._lock:
                if self._idle_count < self.max_idle:
                    self._idle.setdefault(key, []).append(handle)
                    self._idle_count += 1
                    return
        handle.close()

    @property
    def idle(self) -> int:
        """Workers kept for reuse now."""
        with self._lock:
            return self._idle_count

    def close(self) -> None:
        """Close the workers kept for reuse (environments still in use are not touched)."""
        with self._lock:
            handles = [h for kept in self._idle.values() for h in kept]
            self._idle.clear()
            self._idle_count = 0
        for handle in handles:
            handle.close()

    def __enter__(self) -> SandboxedFactory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _kwargs_key(kwargs: dict[str, Any]) -> str | None:
    """``kwargs`` as canonical JSON (the free-list's key); None when they are not JSON data."""
    try:
        return json.dumps(kwargs, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def load_env(
    source: str,
    class_name: str | None = None,
    *,
    sandbox: bool = False,
    sandbox_config: Any = None,
    sandbox_pool: Any = None,
    origin: str = "<source>",
    mode: str = "strict",
) -> EnvFactory:
    """A factory for the environment defined by ``source``.

    ``sandbox=False`` runs trusted code in-process; ``sandbox=True`` runs it in spade-sandbox.
    Either way ``factory(max_turns=10, **kwargs)`` returns an object that follows the contract.
    ``mode="compat"`` runs code written for the released SPADE code as it ran it
    (:mod:`spade_envs.compat`; with ``sandbox_pool``, the pool's config must come from
    ``compat_sandbox_config``).
    """
    if mode == "compat":
        from .compat import CompatFactory, compat_sandbox_config, compat_source

        source = compat_source(source)
        if sandbox and sandbox_pool is None:
            sandbox_config = compat_sandbox_config(sandbox_config)
        inner = load_env(
            source, class_name, sandbox=sandbox, sandbox_config=sandbox_config,
            sandbox_pool=sandbox_pool, origin=origin,
        )  # fmt: skip
        return CompatFactory(inner)
    if mode != "strict":
        raise ValueError(f"mode must be 'strict' or 'compat', not {mode!r}")
    if sandbox:
        return SandboxedFactory(source, class_name, sandbox_config, sandbox_pool, origin)
    return cast(EnvFactory, load_env_class(source, class_name, origin))  # a class builds instances
