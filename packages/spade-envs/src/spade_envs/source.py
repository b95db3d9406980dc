"""Loading environment source: in-process (trusted code) or through spade-sandbox (untrusted).

In-process loading executes the module in this interpreter: use it only for code you trust
(the shipped corpora, your own environments). For generated code pass ``sandbox=True``; that
needs the optional ``spade-sandbox`` package (``pip install 'spade-envs[sandbox]'``) and goes
through its public interface only.
"""

from __future__ import annotations

import ast
import hashlib
import threading
import types
from typing import Any, cast

from .core import DEFAULT_MAX_TURNS, EnvFactory, StepResult
from .errors import SandboxUnavailableError, SourceError

__all__ = ["find_env_class", "load_env_class", "load_env", "SandboxedFactory"]


PARSE_LOCK = threading.RLock()
"""Serializes ``ast.parse`` in this process: CPython 3.11 before 3.11.8 can fail parsing in
several threads at once ("AST constructor recursion depth mismatch", gh-106905). Code that
parses environment sources from threads (spade-corpus validation) holds it too."""


def find_env_class(source: str, class_name: str | None = None, origin: str = "<source>") -> str:
    """The name of the environment class in ``source``, checked without running it.

    With ``class_name`` given it must be defined at top level; otherwise there must be exactly
    one top-level class whose name ends in ``Env``.
    """
    try:
        with PARSE_LOCK:
            tree = ast.parse(source, filename=origin)
    except SyntaxError as exc:
        raise SourceError(f"{origin}: syntax error at line {exc.lineno}: {exc.msg}") from None
    names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
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
    """Gives a spade-sandbox environment handle the contract's method names."""

    def __init__(self, handle: Any):
        self._handle = handle

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        return self._handle.reset(seed=seed)

    def step(self, action: str) -> StepResult:
        return self._handle.step(action)

    def solution(self) -> str:
        return self._handle.call("solution")

    def _keep_reset(self, key: str) -> bool:
        """Ask the worker to keep the state the last reset left under ``key`` (check_env)."""
        return bool(self._handle.snapshot(key))

    def _reset_from_kept(self, key: str) -> bool:
        """Start an episode from a copy of the kept state; False when none is kept."""
        return bool(self._handle.restore(key))

    def close(self) -> None:
        self._handle.close()  # the handle also closes itself when dropped


class SandboxedFactory:
    """An :class:`EnvFactory` whose environments run inside spade-sandbox.

    ``config`` is a ``spade_sandbox.SandboxConfig`` (default: ``SandboxConfig.from_env()``);
    ``pool`` an optional ``spade_sandbox.SandboxPool`` to open environments from warm workers.
    """

    def __init__(
        self,
        source: str,
        class_name: str | None = None,
        config: Any = None,
        pool: Any = None,
        origin: str = "<source>",
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

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> _SandboxedEnvironment:
        opener = self.pool.open_env if self.pool is not None else self._sandbox.open_env
        handle = opener(
            self.source,
            class_name=self.class_name,
            kwargs={"max_turns": max_turns, **kwargs},
            config=self.config,
        )
        return _SandboxedEnvironment(handle)


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
