"""The environment's side of the worker: running untrusted source under the import policy, with
its output captured and capped, and mapping whatever it does to a value or a `CallError`.

Part of the in-sandbox worker program (see worker.py): standard library only.
"""

from __future__ import annotations

import ast
import builtins
import gc
import io
import opcode
import os
import sys
import traceback
import types
from typing import Any

if __package__:
    from . import wire, worker_state
else:  # run as files in one directory inside the sandbox (see worker.py)
    import wire  # type: ignore[no-redef]
    import worker_state  # type: ignore[no-redef]

ENV_FILENAME = "<environment>"


class _ForbiddenImportError(ImportError):
    pass


class CallError(Exception):
    """A failed call, turned into an error reply with `reason`."""

    def __init__(self, reason: str, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.fatal = fatal


class _CappedText(io.TextIOBase):
    """A text sink that keeps at most `cap` characters and remembers whether it overflowed."""

    def __init__(self) -> None:
        self.cap = 0
        self.parts: list[str] = []
        self.size = 0
        self.overflow = False

    def start(self, cap: int) -> None:
        if self.size or self.cap != cap:
            self.cap, self.parts, self.size, self.overflow = cap, [], 0, False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.cap - self.size
        if len(text) > room:
            self.overflow = True
            self.parts.append(text[: max(room, 0)])
            self.size = self.cap
            # Stops a print loop at once; the call is reported as output_too_large either way.
            raise OSError(f"output limit of {self.cap} characters reached")
        self.parts.append(text)
        self.size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


class EnvHost:
    """The environment's side of a worker: its module, instance and builtins, the import guard,
    captured output, and the calls the protocol makes on it. `Worker.init` sets ``allowed``,
    ``max_output`` and ``work_dir``, applies the layers, then calls `start`."""

    def __init__(self) -> None:
        self.allowed: frozenset[str] = frozenset()
        self.max_output = 256 * 1024
        self.violations: list[str] = []
        self.env: object = None
        self.stdout = _CappedText()
        self.stderr = _CappedText()
        self.real_import = builtins.__import__
        self.env_builtins: dict = {}
        self.padding: list[object] = []
        self.snapshots: dict[str, worker_state.Snapshot] = {}
        self.base_builtins: dict = {}
        self.work_dir = "."
        self.opened: dict | None = None  # the last `open` request, which `reopen` repeats
        self.code: tuple[str, types.CodeType] | None = None  # (source, its compiled code)
        self.fresh_random: tuple[Any, Any] = (None, None)
        self.stepped: list | None = None  # the results of a `steps` call before its failure

    def start(self) -> str:
        """The import policy on, standard streams captured, one warm-up episode played, the
        fresh state of the random generators kept (for `reopen`); the layer's state."""
        self.base_builtins = dict(builtins.__dict__)
        self.base_builtins["__import__"] = self.guarded_import
        self.env_builtins = dict(self.base_builtins)
        sys.stdout, sys.stderr, sys.stdin = self.stdout, self.stderr, io.StringIO("")
        self.warm_up()
        self.fresh_random = worker_state.global_random_state()
        return "active"

    def warm_up(self) -> None:
        """Go through open/reset/step once on a tiny environment, so the first real call does
        not pay for first-touch page faults (copy-on-write after a fork) and cold caches."""
        self.open({"source": _WARM_UP_SOURCE})
        wire.encode({"id": 0, "ok": True, "value": self.step({"action": "warm"})})
        self.reset({"seed": 0})
        self.env = None
        self.opened = self.code = None
        del sys.modules[worker_state.ENV_MODULE]

    def guarded_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        # Only code whose builtins are `env_builtins` (the environment's module and what it
        # defines) reaches this function; the standard library keeps the real importer.
        top = name.partition(".")[0]
        if level != 0 or top not in self.allowed:
            what = f"relative import of {name!r}" if level else f"import of {name!r}"
            self.violations.append(f"{what} is not allowed (SandboxConfig.allowed_imports)")
            raise _ForbiddenImportError(self.violations[-1])
        return self.real_import(name, globals, locals, fromlist, level)

    def check_imports(self, source: str) -> types.CodeType:
        """Compile `source`; refuse it if any import, executed or not, leaves the allow-list."""
        try:
            code = compile(source, ENV_FILENAME, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise CallError(
                "env_exception", f"SyntaxError: {exc.msg} (line {exc.lineno})"
            ) from None
        except ValueError as exc:  # e.g. null bytes
            raise CallError("env_exception", f"ValueError: {exc}") from None
        except (RecursionError, MemoryError) as exc:  # nested too deeply to compile
            raise CallError(
                "env_exception", f"{type(exc).__name__}: the source is nested too deeply to compile"
            ) from None
        bad = [name for name in _imported_names(code) if name.partition(".")[0] not in self.allowed]
        if bad:
            raise CallError(
                "forbidden_import",
                f"{_import_line(source, bad[0])}imports {bad[0]!r}, which is not in the allow-list "
                "(SandboxConfig.allowed_imports)",
            )
        return code

    # -- calls ---------------------------------------------------------------------------

    def guarded_call(self, fn, *args):
        """Run environment code; map whatever it does to a value or a `CallError`."""
        if self.violations:
            self.violations.clear()
        self.stdout.start(self.max_output)
        self.stderr.start(self.max_output)
        try:
            value = fn(*args)
        except (CallError, wire.ValueCheckError):
            raise
        except MemoryError:
            raise CallError(
                "memory", "the environment ran out of memory (Limits.mem_mib)", fatal=True
            ) from None
        except SystemExit as exc:
            raise CallError(
                "crashed", f"the environment raised SystemExit({exc.code!r})", fatal=True
            ) from None
        except BaseException as exc:
            self.check_violations()
            raise CallError("env_exception", _describe(exc)) from None
        self.check_violations()
        return value

    def check_violations(self) -> None:
        """Report what the environment did even when it caught the resulting exception."""
        if self.violations:
            raise CallError("forbidden_import", self.violations[0], fatal=True)
        if self.stdout.overflow or self.stderr.overflow:
            raise CallError(
                "output_too_large",
                f"the environment printed more than {self.max_output} characters",
                fatal=True,
            )

    def compiled(self, source: str) -> types.CodeType:
        """`check_imports(source)`, kept for the source opened last (`reopen` runs it again)."""
        if self.code is not None and self.code[0] == source:
            return self.code[1]
        code = self.check_imports(source)
        self.code = (source, code)
        return code

    def open(self, msg: dict, light: bool = False) -> dict:
        self.snapshots.clear()
        code = self.compiled(msg["source"])
        self.env_builtins = dict(self.base_builtins)  # what an earlier environment changed goes
        # Workers forked from one zygote share a heap layout, so id() of the environment's
        # objects would repeat from worker to worker and an episode salted by id(self) would
        # look deterministic. A random amount of live padding makes ids differ per worker.
        self.padding = []  # the previous padding is freed first: its slots are reused
        self.padding = worker_state.heap_padding(light)
        # Padding makes equal ids unlikely, not impossible; the environment's id() also carries a
        # salt drawn per worker (still unique per object within the worker), so an episode
        # salted by id() always differs between two workers.
        self.env_builtins["id"] = worker_state.salted_id(
            int.from_bytes(os.urandom(6), "little") << 4
        )
        module = types.ModuleType(worker_state.ENV_MODULE)
        module.__dict__["__builtins__"] = self.env_builtins
        sys.modules[worker_state.ENV_MODULE] = module
        self.guarded_call(exec, code, module.__dict__)
        cls = _pick_class(module, msg.get("class_name"))
        self.env = self.guarded_call(lambda: cls(**(msg.get("kwargs") or {})))
        self.opened = msg
        return {"class_name": cls.__name__}

    def reopen(self, msg: dict) -> dict:
        """Open the last opened environment again, as a fresh worker would: the old instance is
        closed and dropped with its module, the work dir emptied, the `random` module reseeded
        (as after a fork) and numpy's legacy generator put back as `init` left it; then the
        source runs again in a new module and the class is constructed with the same kwargs.
        Declined (``reopened`` False, nothing changed) when the worker has already used more
        than ``max_cpu_s`` of CPU (its RLIMIT_CPU covers its whole life). The heap padding is
        the light one (see `worker_state.heap_padding`): addresses need to differ between workers for
        the checker's determinism check, which opens a second worker and never reopens."""
        if self.opened is None:
            raise CallError("protocol_error", "no environment was opened in this worker")
        times = os.times()
        used = times.user + times.system
        if used > float(msg["max_cpu_s"]):
            return {"reopened": False, "cpu_s": used}
        self.guarded_call(self.drop_env)
        value = self.open(self.opened, light=True)
        return {**value, "reopened": True, "cpu_s": used}

    def drop_env(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()
        self.env = close = None
        self.snapshots.clear()
        sys.modules.pop(worker_state.ENV_MODULE, None)
        gc.collect()  # the old module's cycles, and what it held open, go now
        _empty_dir(self.work_dir)
        rnd = sys.modules.get("random")
        if rnd is not None:
            rnd.seed()
        if self.fresh_random[1] is not None:
            sys.modules["numpy.random"].set_state(self.fresh_random[1])

    def require_env(self) -> object:
        if self.env is None:
            raise CallError("protocol_error", "no environment is open in this worker")
        return self.env

    # The checks run inside guarded_call too: subclasses of the returned types can run
    # environment code (__len__, items(), __float__) while they are inspected.
    def reset(self, msg: dict) -> list:
        env = self.require_env()
        return self.guarded_call(
            lambda: wire.check_reset(env.reset(seed=msg.get("seed")), self.max_output)  # type: ignore[attr-defined]
        )

    def step(self, msg: dict) -> list:
        env = self.require_env()
        return self.guarded_call(
            lambda: wire.check_step(env.step(msg["action"]), self.max_output)  # type: ignore[attr-defined]
        )

    def steps(self, msg: dict) -> list | dict:
        """Each action of ``msg["actions"]`` through `step`, in order, until one ends the
        episode: the results. With ``msg["restore"]`` the episode first starts from the state
        kept under that key (`restore`; ``{"restored": False}`` and no step when none is
        kept). With ``msg["expect"]`` (an observation) an action after the
        first is taken only while the last step's observation is that one (the caller chose
        it expecting so). When a step fails its error propagates and the results before it
        stay in ``stepped`` (the reply carries them)."""
        actions, expect = msg["actions"], msg.get("expect")  # a missing expect is None
        if not isinstance(actions, list) or not 0 < len(actions) <= wire.MAX_BATCH_STEPS:
            raise CallError("protocol_error", f"steps takes 1 to {wire.MAX_BATCH_STEPS} actions")
        if msg.get("restore") is not None and not self.restore({"key": msg["restore"]}):
            return {"restored": False}  # nothing kept under the key: no step taken
        done: list = []
        self.stepped = done
        for action in actions:
            if not isinstance(action, str):
                raise CallError("protocol_error", "every action of steps must be a string")
            if done and expect is not None and done[-1][0] != expect:
                break
            result = self.step({"action": action})
            done.append(result)
            if result[2] or result[3]:
                break
        self.stepped = None
        return done

    def call(self, msg: dict) -> object:
        env = self.require_env()
        name = msg["method"]
        public = isinstance(name, str) and not name.startswith("_")
        method = self.guarded_call(getattr, env, name, None) if public else None
        if not callable(method):
            raise CallError(
                "env_exception", f"AttributeError: the environment has no public method {name!r}"
            )
        args = msg.get("args", [])
        return self.guarded_call(
            lambda: wire.check_json(method(*args), f"{name}() result", self.max_output)
        )

    def snapshot(self, msg: dict) -> bool:
        """Keep a copy of the environment's state (its instance, its module's globals, its
        classes' data and the ``random`` module's state) under ``msg["key"]``; the host asks
        right after a reset. False, and nothing kept, when the state holds something
        :class:`_StateCopier` does not copy: the host then resets for real."""
        env = self.require_env()
        key = str(msg["key"])
        self.snapshots.pop(key, None)
        try:
            saved = worker_state.Snapshot.take(env)
        except Exception:  # _Uncopyable, RecursionError, MemoryError, a hostile key
            return False
        while len(self.snapshots) >= worker_state.MAX_SNAPSHOTS:
            del self.snapshots[next(iter(self.snapshots))]
        self.snapshots[key] = saved
        return True

    def restore(self, msg: dict) -> bool:
        """Put the environment back into the state kept under ``msg["key"]``, as a reset would
        (a fresh copy each time, so the kept state never changes). False when none is kept."""
        env = self.require_env()
        saved = self.snapshots.get(str(msg["key"]))
        if saved is None:
            return False
        try:
            copied = saved.copy(env)
        except Exception:  # _Uncopyable, RecursionError, MemoryError, a hostile key
            return False
        # Dropping the episode's objects may run their __del__: guarded, as in a reset.
        self.guarded_call(copied.apply, env)
        return True

    def exec_script(self, msg: dict) -> dict:
        returncode = 0
        try:
            code = self.check_imports(msg["source"])
        except CallError as exc:
            return {"returncode": 1, "stdout": "", "stderr": f"{exc}\n", "reason": exc.reason}
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = self.env_builtins
        self.stdout.start(self.max_output)
        self.stderr.start(self.max_output)
        sys.stdin = io.StringIO(msg.get("stdin", ""))
        self.violations.clear()
        reason = None
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            code_ = exc.code
            returncode = code_ if isinstance(code_, int) else (0 if code_ is None else 1)
            if not isinstance(code_, (int, type(None))):
                self.stderr.write(f"{code_}\n")
        except MemoryError:
            returncode, reason = 1, "memory"
        except BaseException:
            returncode = 1
            self.stderr.write("".join(traceback.format_exc(limit=-20)))
        if self.violations:
            reason = "forbidden_import"
        elif self.stdout.overflow or self.stderr.overflow:
            reason = "output_too_large"
        return {
            "returncode": returncode,
            "stdout": self.stdout.getvalue(),
            "stderr": self.stderr.getvalue(),
            "reason": reason,
        }

    def close_env(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            try:
                self.guarded_call(close)
            except CallError:
                pass  # the worker exits right after; a failing close() changes nothing


_WARM_UP_SOURCE = """
class WarmUpEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.state = {"turns": max_turns, **kwargs}

    def reset(self, seed=None):
        return f"start {seed}", {"seed": seed}

    def step(self, action):
        return action.strip().removeprefix("w"), 0.5, len(action) > 3, False, {"n": [len(action)]}
"""


_IMPORT_NAME = opcode.opmap["IMPORT_NAME"]
_EXTENDED_ARG = opcode.opmap["EXTENDED_ARG"]


def _imported_names(code: types.CodeType) -> list[str]:
    """Module names of every `import` in `code` and its nested code objects, from the
    bytecode (several times faster than walking an AST; relative imports are refused at
    run time by the import guard)."""
    names: list[str] = []
    raw, extended = code.co_code, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | extended
        extended = arg << 8 if op == _EXTENDED_ARG else 0
        if op == _IMPORT_NAME:
            names.append(code.co_names[arg])
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _imported_names(const)
    return names


def _import_line(source: str, name: str) -> str:
    """ "line N " of the first import of `name` (only computed for an error message)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(alias.name == name for alias in node.names):
            return f"line {node.lineno} "
        if isinstance(node, ast.ImportFrom) and node.module == name:
            return f"line {node.lineno} "
    return ""


def _pick_class(module: types.ModuleType, class_name: str | None) -> type:
    if class_name is not None:
        cls = module.__dict__.get(class_name)
        if not isinstance(cls, type):
            raise CallError(
                "env_exception", f"LookupError: the source defines no class {class_name!r}"
            )
        return cls
    found = [
        obj
        for name, obj in module.__dict__.items()
        if isinstance(obj, type)
        and name.endswith("Env")
        and obj.__module__ == worker_state.ENV_MODULE
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise CallError(
            "env_exception",
            f"LookupError: expected exactly one class whose name ends in 'Env' (found: {names}); pass class_name",
        )
    return found[0]


def _describe(exc: BaseException) -> str:
    """`Type: text`, plus where in the environment's source it was raised."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # a hostile __str__ must not take the worker down
        text = f"{type(exc).__name__}: <its message could not be read>"
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except BaseException:
        frames = traceback.StackSummary()
    where = [f for f in frames if f.filename == ENV_FILENAME]
    if where:
        text += f" (line {where[-1].lineno}, in {where[-1].name})"
    return text[:4000]


def _empty_dir(path: str) -> None:
    """Remove everything under `path` (symbolic links are removed, never followed)."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _empty_dir(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
