"""The environment's state inside the worker: copies of it (`Snapshot`, for `snapshot` /
`restore`) that run none of the environment's code, the `random` module's state, and the heap
padding and salted ``id`` that make object identities differ from worker to worker.

Part of the in-sandbox worker program (see worker.py): standard library only.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any

ENV_MODULE = "spade_environment"
"""The name of the module the environment's source runs in."""


class _Padding:
    """A small instance, one of the object sizes `Worker.open` pads the heap with."""


class _Slotted:
    __slots__ = ("a", "b")


def salted_id(salt: int) -> Callable[[object], int]:
    """``id`` as the environment sees it: the object's id XOR a per-worker salt."""
    real = id

    def salted(obj: object, /) -> int:
        return real(obj) ^ salt

    return salted


def heap_padding(light: bool = False) -> list[object]:
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
MAX_SNAPSHOTS = 8


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
            return obj  # a class, shared as deepcopy does (its data is a Snapshot's to keep)
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


class Snapshot:
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
    def take(cls, env: object) -> Snapshot:
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
            global_random_state(),
        )
        return state.copy(env)

    def copy(self, env: object) -> Snapshot:
        """A deep copy whose references to ``env`` stay ``env``."""
        copier = _StateCopier({id(env): env})
        return Snapshot(
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
        _set_global_random_state(self.random_state)


def global_random_state() -> tuple[Any, Any]:
    """The state of the ``random`` module's (and numpy's legacy) global generator, if loaded."""
    rnd, np_random = sys.modules.get("random"), sys.modules.get("numpy.random")
    return (
        rnd.getstate() if rnd is not None else None,
        np_random.get_state() if np_random is not None else None,
    )


def _set_global_random_state(state: tuple[Any, Any]) -> None:
    python_state, numpy_state = state
    if python_state is not None:
        sys.modules["random"].setstate(python_state)
    if numpy_state is not None:
        sys.modules["numpy.random"].set_state(numpy_state)
