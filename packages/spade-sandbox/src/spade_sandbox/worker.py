"""The in-sandbox worker: loads untrusted environment source and serves calls over the wire.

How a backend launches it
-------------------------
Standard library only, no installation needed: copy (or bind-mount read-only) this file and
`wire.py` into one directory inside the sandbox and run

    python3 -S -B /that/dir/worker.py            # protocol on stdin (fd 0) / stdout (fd 1)
    python3 -S -B /that/dir/worker.py --fds 3,4  # protocol on fds 3 (requests) and 4 (replies)
    python3 -S -B /that/dir/worker.py --zygote   # fork server on a unix socket at fd 0 (see zygote())

(`python -m spade_sandbox.worker` works too where the package is installed.) Requests arrive
as frames (see wire.py) on the request fd and replies leave on the reply fd. At start the
worker moves the protocol to private descriptors and points fds 0 and 1 at /dev/null, so
nothing the environment prints or writes can corrupt the channel; `print` output is captured
per call and capped. fd 2 is left as the backend passed it: only interpreter crash messages
land there. Start it as root (it drops to uid 65534 itself) or as an unprivileged user.

The first request must be `init`. It applies, in this order: preloading the allowed modules,
chdir to the work dir, dropping to uid 65534 (when root and asked to), Landlock (writes only
under the work dir, reads only under `read_paths`), rlimits, a seccomp filter, and the import
policy. Its reply lists each layer as "active" or "unavailable: why". Then `open`, `reset`,
`step`, `call`, `snapshot`, `restore`, `reopen` (the same source constructed again, see
`Worker.reopen`), `exec` (one-off scripts) and `close` follow. Exit status: 0 after `close`,
70 when the channel breaks (the host reports `protocol_error`), signals as the kernel sends
them (SIGSYS from seccomp: `forbidden_syscall`; SIGXCPU: `timeout`).
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
from collections.abc import Callable, Sequence
from typing import Any

if __package__:
    from . import wire
else:  # run as a file next to wire.py
    import wire  # type: ignore[no-redef]

EXIT_CHANNEL_BROKEN = 70
ENV_MODULE = "spade_environment"
ENV_FILENAME = "<environment>"
NOBODY = 65534


class _ForbiddenImportError(ImportError):
    pass


class _CallError(Exception):
    """A failed call, turned into an error reply with `reason`."""

    def __init__(self, reason: str, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.fatal = fatal


class _Padding:
    """A small instance, one of the object sizes `Worker.open` pads the heap with."""


class _Slotted:
    __slots__ = ("a", "b")


def _salted_id(salt: int) -> Callable[[object], int]:
    """``id`` as the environment sees it: the object's id XOR a per-worker salt."""
    real = id

    def salted(obj: object, /) -> int:
        return real(obj) ^ salt

    return salted


def _heap_padding(light: bool = False) -> list[object]:
    """A random number of live objects of each common small size: the next objects of those
    sizes (the environment's) land at addresses, and so ids, that differ from worker to
    worker, though all are forked from one zygote with one heap layout. Instances of a plain
    class (the size of most environment instances) get 1 to 4096, so two workers give an
    environment the same id() about once in 4096 opens; the other sizes 1 to 511.

    ``light`` (a `reopen`: the worker's heap already differs from its siblings') gives 1 to 64
    of each, which still moves the new instance off the old one's address most of the time,
    for a tenth of the cost (~25 against ~300 us)."""
    if light:
        counts = [1 + n % 64 for n in os.urandom(6)]
    else:
        counts = [1 + 2 * n for n in os.urandom(6)]
        counts[3] = 1 + int.from_bytes(os.urandom(2), "little") % 4096  # _Padding: instance size
    kinds = (object, list, dict, _Padding, _Slotted, set)
    return [kind() for kind, n in zip(kinds, counts, strict=True) for _ in range(n)]


class _Uncopyable(Exception):
    """The environment's state holds something :class:`_StateCopier` does not copy safely."""


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_TYPE_DICT = type.__dict__["__dict__"]
_GETSET = type(_TYPE_DICT)
#: Class attributes that change how an instance is copied, looked up or freed: such a class's
#: state is not copied (the checker then resets for real).
_HOOKS = frozenset(
    "__getattribute__ __getattr__ __setattr__ __delattr__ __copy__ __deepcopy__ __reduce__ "
    "__reduce_ex__ __getstate__ __setstate__ __del__ __slots__".split()
)
_SHARED = frozenset(
    {int, float, complex, bool, str, bytes, type(None), range, type(Ellipsis), type,
     types.ModuleType}
)  # fmt: skip
_MAX_COPIED = 50_000
_MAX_SNAPSHOTS = 8


def _plain_class(cls: type) -> bool:
    """Whether instances of ``cls`` are plain objects: a ``__dict__`` and no copy or attribute
    hooks, so copying one runs none of the environment's code."""
    if type(cls) is not type or cls.__mro__[-1] is not object:
        return False
    for base in cls.__mro__[:-1]:
        attrs = base.__dict__
        if not base.__flags__ & _HEAPTYPE or any(h in attrs for h in _HOOKS):
            return False
        if "__dict__" in attrs and type(attrs["__dict__"]) is not _GETSET:
            return False
    return True


def _stateless_function(fn: Any) -> bool:
    """Whether sharing ``fn`` between copies keeps no state alive: no closure cells, no
    mutable default, not a builtin bound to an object (``rng.choice``)."""
    if type(fn) is types.BuiltinFunctionType:
        owner = fn.__self__
        return owner is None or type(owner) is types.ModuleType
    defaults = [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    return not fn.__closure__ and all(_hashable_value(d) for d in defaults)


def _hashable_value(key: object) -> bool:
    """A dict key or set member whose hash and equality run no environment code."""
    if type(key) in _SHARED:
        return True
    if type(key) in (tuple, frozenset):
        return all(_hashable_value(k) for k in key)  # type: ignore[attr-defined]
    return False


class _StateCopier:
    """Deep copies of the environment's data that run none of its code, unlike
    ``copy.deepcopy`` (no ``__deepcopy__``, ``__reduce__``, ``__hash__`` or ``__eq__`` of
    theirs): builtin containers, ``random.Random``, ``collections`` containers and instances
    of plain classes (:func:`_plain_class`). Anything else raises :class:`_Uncopyable`.
    ``memo`` maps the ids already copied, as deepcopy's does."""

    def __init__(self, memo: dict[int, object]) -> None:
        self.memo = memo
        self.shared = set(_SHARED) | _loaded_types(
            ("fractions", "Fraction"), ("decimal", "Decimal"), ("re", "Pattern")
        )
        self.dicts = {dict} | _loaded_types(
            ("collections", "OrderedDict"),
            ("collections", "defaultdict"),
            ("collections", "Counter"),
        )
        self.deque = _loaded_types(("collections", "deque"))
        self.caches = _loaded_types(("functools", "_lru_cache_wrapper"))
        self.random = _loaded_types(("random", "Random"))

    def copy(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in self.shared:
            return obj
        if kind is types.FunctionType or kind is types.BuiltinFunctionType:
            if not _stateless_function(obj):
                raise _Uncopyable("a function with state of its own")
            return obj  # shared, as deepcopy shares functions
        if issubclass(kind, type):
            return obj  # a class, shared as deepcopy does (its data is a _Snapshot's to keep)
        if kind in self.caches and _stateless_function(obj.__wrapped__):
            return obj  # a module's functools.cache: a real reset keeps it too
        found = self.memo.get(id(obj), _MISSING)
        if found is not _MISSING:
            return found
        if len(self.memo) > _MAX_COPIED:
            raise _Uncopyable("too many objects")
        if kind is tuple:
            items = [self.copy(v) for v in obj]
            new = obj if all(a is b for a, b in zip(items, obj, strict=True)) else tuple(items)
        elif kind is frozenset or kind is set:
            if not all(_hashable_value(v) for v in obj):
                raise _Uncopyable("a set of objects")
            new = obj if kind is frozenset else set(obj)
        elif kind is list:
            new = self.memo[id(obj)] = []
            new.extend(self.copy(v) for v in obj)
        elif kind in self.dicts:
            new = self.copy_dict(obj)
        elif kind in self.deque:
            new = self.memo[id(obj)] = kind(maxlen=obj.maxlen)
            new.extend(self.copy(v) for v in obj)
        elif kind in self.random:
            new = kind(0)  # seeded, so no entropy is read
            new.setstate(obj.getstate())
        elif kind is types.MethodType and type(obj.__func__) is types.FunctionType:
            new = types.MethodType(obj.__func__, self.copy(obj.__self__))
        elif _plain_class(kind):
            new = self.memo[id(obj)] = object.__new__(kind)
            fields = self.copy_dict(object.__getattribute__(obj, "__dict__"), str)
            object.__getattribute__(new, "__dict__").update(fields)
        else:
            raise _Uncopyable("an object of another type")
        self.memo[id(obj)] = new
        return new

    def copy_dict(self, obj: Any, key_type: type | None = None) -> Any:
        if not all(type(k) is key_type if key_type else _hashable_value(k) for k in obj):
            raise _Uncopyable("a dict keyed by objects")
        factory = getattr(obj, "default_factory", _MISSING)
        new = type(obj)() if factory is _MISSING else type(obj)(self.copy(factory))
        self.memo[id(obj)] = new
        for key, value in obj.items():
            new[key] = self.copy(value)
        return new


_MISSING = object()


def _loaded_types(*names: tuple[str, str]) -> set[type]:
    """The named stdlib classes whose modules are loaded (an unloaded one holds no state)."""
    found = set()
    for module, name in names:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.add(cls)
    return found


_CLASS_CODE = frozenset(
    {types.FunctionType, staticmethod, classmethod, property, _GETSET, types.MemberDescriptorType}
)


def _dunder(name: object) -> bool:
    return type(name) is str and name.startswith("__") and name.endswith("__")


class _Snapshot:
    """An environment's state right after a reset: what a restore puts back."""

    def __init__(
        self,
        fields: dict,
        module_vars: dict,
        class_vars: dict[type, dict],
        random_state: tuple[Any, Any],
    ) -> None:
        self.fields, self.module_vars, self.class_vars = fields, module_vars, class_vars
        self.random_state = random_state

    @classmethod
    def take(cls, env: object) -> _Snapshot:
        if not _plain_class(type(env)):
            raise _Uncopyable("an environment with hooks")
        module = sys.modules.get(ENV_MODULE)
        module_vars = dict(module.__dict__) if module is not None else {}
        classes = set(type(env).__mro__[:-1])
        for value in module_vars.values():
            if issubclass(type(value), type):
                namespace = _TYPE_DICT.__get__(value)  # no metaclass code runs
                if namespace.get("__module__") == ENV_MODULE:
                    if type(value) is not type:  # a metaclass's code would run on hashing
                        raise _Uncopyable("a class with a metaclass")
                    classes.add(value)
        if not all(_plain_class(c) for c in classes):
            raise _Uncopyable("a class with a metaclass or copy hooks")
        class_vars = {
            c: {
                k: v for k, v in c.__dict__.items() if not _dunder(k) and type(v) not in _CLASS_CODE
            }
            for c in classes
        }
        state = cls(
            dict(object.__getattribute__(env, "__dict__")),
            {k: v for k, v in module_vars.items() if not _dunder(k)},
            class_vars,
            _random_state(),
        )
        return state.copy(env)

    def copy(self, env: object) -> _Snapshot:
        """A deep copy whose references to ``env`` stay ``env``."""
        copier = _StateCopier({id(env): env})
        return _Snapshot(
            copier.copy_dict(self.fields, str),
            copier.copy_dict(self.module_vars, str),
            {c: copier.copy_dict(attrs, str) for c, attrs in self.class_vars.items()},
            self.random_state,
        )

    def apply(self, env: object) -> None:
        """Make this (a fresh copy) the live state of ``env``; assignments only, no copying."""
        fields = object.__getattribute__(env, "__dict__")
        fields.clear()
        fields.update(self.fields)
        module = sys.modules.get(ENV_MODULE)
        if module is not None:
            names = module.__dict__
            for name in [n for n in names if not _dunder(n) and n not in self.module_vars]:
                del names[name]
            names.update(self.module_vars)
        for c, attrs in self.class_vars.items():
            for name, value in attrs.items():
                type.__setattr__(c, name, value)
        _set_random_state(self.random_state)


def _random_state() -> tuple[Any, Any]:
    """The state of the ``random`` module's (and numpy's legacy) global generator, if loaded."""
    rnd, np_random = sys.modules.get("random"), sys.modules.get("numpy.random")
    return (
        rnd.getstate() if rnd is not None else None,
        np_random.get_state() if np_random is not None else None,
    )


def _set_random_state(state: tuple[Any, Any]) -> None:
    python_state, numpy_state = state
    if python_state is not None:
        sys.modules["random"].setstate(python_state)
    if numpy_state is not None:
        sys.modules["numpy.random"].set_state(numpy_state)


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


class Worker:
    def __init__(self, request_fd: int, reply_fd: int) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.allowed: frozenset[str] = frozenset()
        self.max_output = 256 * 1024
        self.violations: list[str] = []
        self.env: object = None
        self.stdout = _CappedText()
        self.stderr = _CappedText()
        self.real_import = builtins.__import__
        self.env_builtins: dict = {}
        self.padding: list[object] = []
        self.snapshots: dict[str, _Snapshot] = {}
        self.base_builtins: dict = {}
        self.work_dir = "."
        self.opened: dict | None = None  # the last `open` request, which `reopen` repeats
        self.code: tuple[str, types.CodeType] | None = None  # (source, its compiled code)
        self.fresh_random: tuple[Any, Any] = (None, None)

    # -- isolation -----------------------------------------------------------------------
    def init(self, msg: dict) -> dict:
        limits = msg["limits"]
        self.max_output = int(limits["max_output_kib"]) * 1024
        self.allowed = frozenset(msg["allowed_imports"])
        apply = set(msg.get("apply", ("unprivileged_uid", "landlock", "rlimits", "seccomp")))
        layers: dict[str, str] = {}
        preload(self.allowed, msg.get("python_path", ()))
        work_dir = self.work_dir = msg["work_dir"]
        os.chdir(work_dir)
        # Landlock's paths are opened while still privileged: a work root below a directory
        # uid 65534 cannot traverse (a 0700 parent) stays reachable through these handles.
        read_paths = [p for p in msg.get("read_paths", []) if os.path.exists(p)]
        handles = _open_paths(read_paths, work_dir) if "landlock" in apply else []
        try:
            layers["unprivileged_uid"] = (
                _drop_uid() if "unprivileged_uid" in apply else "unavailable: not requested"
            )
            _die_with_parent()
            os.environ["HOME"] = work_dir  # expanduser("~") needs no password database then
            layers["landlock"] = (
                _landlock(handles) if "landlock" in apply else "unavailable: not requested"
            )
        finally:
            for fd, _, _ in handles:
                os.close(fd)
        layers["rlimits"] = _rlimits(limits) if "rlimits" in apply else "unavailable: not requested"
        layers["seccomp"] = _seccomp() if "seccomp" in apply else "unavailable: not requested"
        self.base_builtins = dict(builtins.__dict__)
        self.base_builtins["__import__"] = self.guarded_import
        self.env_builtins = dict(self.base_builtins)
        layers["import_policy"] = "active"
        sys.stdout, sys.stderr, sys.stdin = self.stdout, self.stderr, io.StringIO("")
        self.warm_up()
        self.fresh_random = _random_state()
        gc.collect()
        gc.freeze()
        return {
            "layers": layers,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
        }

    def warm_up(self) -> None:
        """Go through open/reset/step once on a tiny environment, so the first real call does
        not pay for first-touch page faults (copy-on-write after a fork) and cold caches."""
        self.open({"source": _WARM_UP_SOURCE})
        wire.encode({"id": 0, "ok": True, "value": self.step({"action": "warm"})})
        self.reset({"seed": 0})
        self.env = None
        self.opened = self.code = None
        del sys.modules[ENV_MODULE]

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
            raise _CallError(
                "env_exception", f"SyntaxError: {exc.msg} (line {exc.lineno})"
            ) from None
        except ValueError as exc:  # e.g. null bytes
            raise _CallError("env_exception", f"ValueError: {exc}") from None
        except (RecursionError, MemoryError) as exc:  # nested too deeply to compile
            raise _CallError(
                "env_exception", f"{type(exc).__name__}: the source is nested too deeply to compile"
            ) from None
        bad = [name for name in _imported_names(code) if name.partition(".")[0] not in self.allowed]
        if bad:
            raise _CallError(
                "forbidden_import",
                f"{_import_line(source, bad[0])}imports {bad[0]!r}, which is not in the allow-list "
                "(SandboxConfig.allowed_imports)",
            )
        return code

    # -- calls ---------------------------------------------------------------------------
    def guarded_call(self, fn, *args):
        """Run environment code; map whatever it does to a value or a `_CallError`."""
        if self.violations:
            self.violations.clear()
        self.stdout.start(self.max_output)
        self.stderr.start(self.max_output)
        try:
            value = fn(*args)
        except (_CallError, wire.ValueCheckError):
            raise
        except MemoryError:
            raise _CallError(
                "memory", "the environment ran out of memory (Limits.mem_mib)", fatal=True
            ) from None
        except SystemExit as exc:
            raise _CallError(
                "crashed", f"the environment raised SystemExit({exc.code!r})", fatal=True
            ) from None
        except BaseException as exc:
            self.check_violations()
            raise _CallError("env_exception", _describe(exc)) from None
        self.check_violations()
        return value

    def check_violations(self) -> None:
        """Report what the environment did even when it caught the resulting exception."""
        if self.violations:
            raise _CallError("forbidden_import", self.violations[0], fatal=True)
        if self.stdout.overflow or self.stderr.overflow:
            raise _CallError(
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
        self.padding = _heap_padding(light)
        # Padding makes equal ids unlikely, not impossible; the environment's id() also carries a
        # salt drawn per worker (still unique per object within the worker), so an episode
        # salted by id() always differs between two workers.
        self.env_builtins["id"] = _salted_id(int.from_bytes(os.urandom(6), "little") << 4)
        module = types.ModuleType(ENV_MODULE)
        module.__dict__["__builtins__"] = self.env_builtins
        sys.modules[ENV_MODULE] = module
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
        the light one (see `_heap_padding`): addresses need to differ between workers for
        the checker's determinism check, which opens a second worker and never reopens."""
        if self.opened is None:
            raise _CallError("protocol_error", "no environment was opened in this worker")
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
        sys.modules.pop(ENV_MODULE, None)
        gc.collect()  # the old module's cycles, and what it held open, go now
        _empty_dir(self.work_dir)
        rnd = sys.modules.get("random")
        if rnd is not None:
            rnd.seed()
        if self.fresh_random[1] is not None:
            sys.modules["numpy.random"].set_state(self.fresh_random[1])

    def require_env(self) -> object:
        if self.env is None:
            raise _CallError("protocol_error", "no environment is open in this worker")
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

    def call(self, msg: dict) -> object:
        env = self.require_env()
        name = msg["method"]
        public = isinstance(name, str) and not name.startswith("_")
        method = self.guarded_call(getattr, env, name, None) if public else None
        if not callable(method):
            raise _CallError(
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
            saved = _Snapshot.take(env)
        except Exception:  # _Uncopyable, RecursionError, MemoryError, a hostile key
            return False
        while len(self.snapshots) >= _MAX_SNAPSHOTS:
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
        except _CallError as exc:
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
            except _CallError:
                pass  # the worker exits right after; a failing close() changes nothing

    # -- loop ----------------------------------------------------------------------------
    def reply(self, frame: bytes) -> None:
        try:
            wire.write_all(self.reply_fd, frame)
        except (wire.FrameError, OSError):
            os._exit(EXIT_CHANNEL_BROKEN)

    def serve(self) -> None:
        handlers = {
            "init": self.init,
            "open": self.open,
            "reset": self.reset,
            "step": self.step,
            "call": self.call,
            "snapshot": self.snapshot,
            "restore": self.restore,
            "reopen": self.reopen,
            "exec": self.exec_script,
        }
        requests = wire.FrameReader(self.request_fd)
        while True:
            try:
                msg = requests.read(wire.MAX_FRAME_BYTES)
            except (wire.FrameError, OSError):
                os._exit(EXIT_CHANNEL_BROKEN)
            if not isinstance(msg, dict):
                os._exit(EXIT_CHANNEL_BROKEN)
            rid, op = msg.get("id"), msg.get("op")
            if op == "close":
                self.close_env()
                self.reply(wire.encode({"id": rid, "ok": True, "value": None}))
                os._exit(0)
            fatal = False
            try:
                handler = handlers.get(str(op))
                if handler is None:
                    raise _CallError("protocol_error", f"unknown op {op!r}")
                answer = {"id": rid, "ok": True, "value": handler(msg)}
            except _CallError as exc:
                answer = {"id": rid, "ok": False, "reason": exc.reason, "message": str(exc)}
                fatal = exc.fatal
            except wire.ValueCheckError as exc:
                answer = {"id": rid, "ok": False, "reason": exc.kind, "message": str(exc)}
            except MemoryError:
                answer = {
                    "id": rid,
                    "ok": False,
                    "reason": "memory",
                    "message": "the worker ran out of memory",
                }
                fatal = True
            except (KeyError, TypeError) as exc:
                answer = {
                    "id": rid,
                    "ok": False,
                    "reason": "protocol_error",
                    "message": f"malformed request: {exc!r}",
                }
            try:
                frame = wire.encode(answer)
            except (TypeError, ValueError, wire.FrameError) as exc:
                frame = wire.encode(
                    {
                        "id": rid,
                        "ok": False,
                        "reason": "bad_return",
                        "message": f"reply is not JSON: {exc}",
                    }
                )
            self.reply(frame)
            if fatal:
                os._exit(0)


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


def preload(allowed: frozenset[str], python_path: Sequence[str] = ()) -> None:
    """Import the allowed modules and what the layers need while the interpreter's files are
    still readable; freeze them so the collector does not rescan them on every call.
    ``python_path``: directories searched after the standard library (allowed third-party
    modules such as numpy)."""
    for path in python_path:
        if path not in sys.path:
            sys.path.append(path)
    for name in sorted(allowed):
        try:
            builtins.__import__(name)
        except ImportError:
            pass
    import ctypes  # noqa: F401
    import resource  # noqa: F401
    import struct  # noqa: F401

    gc.collect()
    gc.freeze()


def _pick_class(module: types.ModuleType, class_name: str | None) -> type:
    if class_name is not None:
        cls = module.__dict__.get(class_name)
        if not isinstance(cls, type):
            raise _CallError(
                "env_exception", f"LookupError: the source defines no class {class_name!r}"
            )
        return cls
    found = [
        obj
        for name, obj in module.__dict__.items()
        if isinstance(obj, type) and name.endswith("Env") and obj.__module__ == ENV_MODULE
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise _CallError(
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


def _drop_uid() -> str:
    if os.getuid() != 0:
        return f"active: started unprivileged as uid {os.getuid()}"
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return f"active: uid {NOBODY}"


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL


def _rlimits(limits: dict) -> str:
    import resource

    mib = 1024 * 1024
    wanted = {
        resource.RLIMIT_AS: int(limits["mem_mib"]) * mib,
        resource.RLIMIT_CPU: int(limits["cpu_s"]),
        resource.RLIMIT_NPROC: int(limits["max_procs"]),
        resource.RLIMIT_FSIZE: int(limits["max_file_mib"]) * mib,
        resource.RLIMIT_NOFILE: int(limits["max_open_files"]),
        resource.RLIMIT_CORE: 0,
    }
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value if which != resource.RLIMIT_CPU else value + 1))
    return (
        f"active: address space {limits['mem_mib']} MiB, CPU {limits['cpu_s']} s, {limits['max_procs']} processes, "
        f"files {limits['max_file_mib']} MiB, {limits['max_open_files']} fds, no core dumps"
    )


# Landlock (Linux >= 5.13) through raw system calls; x86_64 numbers.
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_FS_READ = 1 | 4 | 8  # execute, read_file, read_dir


_FILE_RIGHTS = 1 | 2 | 4 | (1 << 14)  # execute, write_file, read_file, truncate


def _open_paths(read_paths: list[str], work_dir: str) -> list[tuple[int, str, bool]]:
    """O_PATH handles for the Landlock rules: (fd, "read" or "all", is a directory)."""
    handles = []
    for path, rights in [(p, "read") for p in read_paths] + [(work_dir, "all")]:
        handles.append((os.open(path, os.O_PATH | os.O_CLOEXEC), rights, os.path.isdir(path)))
    return handles


def _landlock(handles: list[tuple[int, str, bool]]) -> str:
    """Restrict this process to `handles` (opened by `_open_paths`; the caller closes them)."""
    import ctypes

    if os.uname().machine != "x86_64":
        return (
            f"unavailable: system call numbers are only known for x86_64, not {os.uname().machine}"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return f"unavailable: kernel has no Landlock ({os.strerror(ctypes.get_errno())})"
    fs_all = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        fs_all |= 1 << 13  # refer
    if abi >= 3:
        fs_all |= 1 << 14  # truncate
    if abi >= 5:
        fs_all |= 1 << 15  # ioctl_dev
    attr = [fs_all]
    if abi >= 4:
        attr.append(1 | 2)  # net: bind_tcp, connect_tcp (no rule grants them)
    if abi >= 6:
        if len(attr) == 1:
            attr.append(0)
        attr.append(1 | 2)  # scoped: abstract unix sockets, signals to processes outside
    buf = (ctypes.c_uint64 * len(attr))(*attr)
    ruleset = libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET,
        ctypes.byref(buf),
        ctypes.c_size_t(ctypes.sizeof(buf)),
        ctypes.c_uint32(0),
    )
    if ruleset < 0:
        return f"unavailable: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        for fd, rights, is_dir in handles:
            access = _FS_READ if rights == "read" else fs_all
            # Files (not directories) take only file rights.
            rule = PathBeneath(access if is_dir else access & _FILE_RIGHTS, fd)
            if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                error = os.strerror(ctypes.get_errno())
                return f"unavailable: landlock_add_rule(fd {fd}) failed ({error})"
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed"
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"unavailable: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    extra = (", no TCP bind/connect" if abi >= 4 else "") + (
        ", signals only inside its domain" if abi >= 6 else ""
    )
    return f"active: ABI {abi}, reads only system and interpreter dirs, writes only its work dir{extra}"


# seccomp: a hand-built classic-BPF deny-list (x86_64).
_KILLED_SYSCALLS = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
    "syslog": 103, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114,
    "setgroups": 116, "setresuid": 117, "setresgid": 119, "rt_sigqueueinfo": 129,
    "personality": 135, "vhangup": 153, "pivot_root": 155, "chroot": 161, "acct": 163,
    "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "tkill": 200,
    "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "rt_tgsigqueueinfo": 297,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    # SysV IPC: workers forked from one zygote share an IPC namespace.
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
    "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220,
}  # fmt: skip
_SYS_CLONE, _SYS_CLONE3, _SYS_KILL, _SYS_TGKILL = 56, 435, 62, 234
_CLONE_THREAD = 0x10000
_SIGKILL = 9
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_KILL, _RET_ALLOW, _RET_ENOSYS = 0x80000000, 0x7FFF0000, 0x00050000 | 38
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def seccomp_program(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions: kill on the deny-list, new processes,
    signals to anything but this process, and SIGKILL to itself; clone3 answers ENOSYS so threads use clone."""
    arg0 = 16  # offsetof(struct seccomp_data, args[0]), low 32 bits on little-endian
    arg1, arg2 = arg0 + 8, arg0 + 16
    prog = [
        (_LD_ABS, 0, 0, 4),  # arch
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _RET_KILL),
        (_LD_ABS, 0, 0, 0),  # syscall number
        (_JGE, 0, 1, 0x40000000),  # x32 ABI
        (_RET, 0, 0, _RET_KILL),
    ]
    for nr in sorted(_KILLED_SYSCALLS.values()):
        prog += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _RET_KILL)]
    prog += [(_JEQ, 0, 1, _SYS_CLONE3), (_RET, 0, 0, _RET_ENOSYS)]
    # clone: only threads.
    prog += [(_JEQ, 0, 4, _SYS_CLONE), (_LD_ABS, 0, 0, arg0), (_JSET, 1, 0, _CLONE_THREAD),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    # kill(pid, sig): only 0 (own process group) or this process; tgkill(tgid, tid, sig): only
    # this process. Never SIGKILL: a SIGKILL the host did not send is then evidence of a kill
    # from outside the sandbox (an infrastructure fault), never the environment's own doing.
    prog += [(_JEQ, 0, 8, _SYS_KILL), (_LD_ABS, 0, 0, arg0), (_JEQ, 2, 0, 0), (_JEQ, 1, 0, own_pid),
             (_RET, 0, 0, _RET_KILL), (_LD_ABS, 0, 0, arg1), (_JEQ, 0, 1, _SIGKILL),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    prog += [(_JEQ, 0, 7, _SYS_TGKILL), (_LD_ABS, 0, 0, arg0), (_JEQ, 1, 0, own_pid),
             (_RET, 0, 0, _RET_KILL), (_LD_ABS, 0, 0, arg2), (_JEQ, 0, 1, _SIGKILL),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    prog.append((_RET, 0, 0, _RET_ALLOW))
    return prog


def _seccomp() -> str:
    import ctypes
    import struct

    if os.uname().machine != "x86_64":
        return (
            f"unavailable: system call numbers are only known for x86_64, not {os.uname().machine}"
        )
    prog = seccomp_program(os.getpid())
    raw = b"".join(struct.pack("=HBBI", *insn) for insn in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"unavailable: seccomp filter refused ({os.strerror(ctypes.get_errno())})"
    return f"active: {len(_KILLED_SYSCALLS)} system calls, new processes and foreign signals kill the worker"


def zygote(control_fd: int) -> None:
    """Fork server: preload once, then fork one fresh worker per request.

    The control channel is a SOCK_SEQPACKET unix socket; each message is one JSON object.
    Host -> zygote: {"op": "preload", "allowed_imports": [...]}, then
    {"op": "fork", "id": n, "work_dir": path} carrying three fds (the worker's request and
    reply ends and its private stderr file) and {"op": "kill", "pid": p}. Zygote -> host: {"event": "ready"},
    {"event": "forked", "id": n, "pid": p}, {"event": "exit", "pid": p, "status": s, "cpu_s": c}
    (s < 0: killed by signal -s; c: the CPU seconds it used). A forked child is an ordinary worker: the host sends it
    `init` over its own channel, and it applies every layer itself. The zygote runs no
    untrusted code; when the host closes the socket it kills its children and exits.
    """
    import json
    import select
    import signal
    import socket

    sock = socket.socket(fileno=control_fd)
    children: dict[int, int] = {}  # pidfd -> pid

    def send(message: dict) -> None:
        sock.send(json.dumps(message).encode())

    while True:
        ready = select.select([sock.fileno(), *children], [], [])[0]
        for fd in ready:
            if fd in children:
                pid = children.pop(fd)
                os.close(fd)
                _, status, usage = os.wait4(pid, 0)
                cpu = round(usage.ru_utime + usage.ru_stime, 3)
                send(
                    {
                        "event": "exit",
                        "pid": pid,
                        "status": os.waitstatus_to_exitcode(status),
                        "cpu_s": cpu,
                    }
                )
                continue
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
            if not data:
                for pid in children.values():
                    os.kill(pid, signal.SIGKILL)
                os._exit(0)
            msg = json.loads(data)
            if msg["op"] == "preload":
                preload(frozenset(msg["allowed_imports"]), msg.get("python_path", ()))
                send({"event": "ready"})
            elif msg["op"] == "kill":
                if msg["pid"] in children.values():
                    os.kill(msg["pid"], signal.SIGKILL)
            elif msg["op"] == "fork":
                os.mkdir(msg["work_dir"], 0o700)
                if os.getuid() == 0:
                    os.chown(msg["work_dir"], NOBODY, NOBODY)
                pid = os.fork()
                if pid == 0:
                    try:
                        sock.close()
                        for other in children:
                            os.close(other)
                        os.setsid()
                        # A private stderr (fds[2]) replaces the zygote's, which every
                        # sibling would otherwise share and could read back.
                        os.dup2(fds[2], 2)
                        os.close(fds[2])
                        Worker(fds[0], fds[1]).serve()
                    finally:
                        os._exit(EXIT_CHANNEL_BROKEN)
                for received in fds:
                    os.close(received)
                children[os.pidfd_open(pid)] = pid
                send({"event": "forked", "id": msg["id"], "pid": pid})


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    request_fd, reply_fd = 0, 1
    if len(argv) == 2 and argv[0] == "--fds":
        request_fd, reply_fd = (int(x) for x in argv[1].split(","))
    # Private copies of the channel; 0 and 1 then point at /dev/null.
    request_fd, reply_fd = os.dup(request_fd), os.dup(reply_fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    if argv == ["--zygote"]:
        os.close(reply_fd)
        zygote(request_fd)
    else:
        Worker(request_fd, reply_fd).serve()


if __name__ == "__main__":
    main()
