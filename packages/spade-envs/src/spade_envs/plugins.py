"""One registry of named plug-ins, for every SPADE package.

Designer rewards and advantage estimators (spade-train), policy backends and environment
sources (spade-train) and evaluation suites (spade-eval) are each a :class:`Registry`: a name
maps to one object, a second registration of a name is refused, a lookup of a name never
registered says which names exist, and every such mistake is one :class:`RegistryError` (a
``ValueError``) whose message names the problem and the fix.

A package registers its built-ins when its registry's module is imported (``register``, or
``register_lazy`` for one that is slow to import), and other packages add theirs from outside,
either by calling ``register`` or through the registry's entry-point group
(``[project.entry-points."<group>"]`` in their ``pyproject.toml``), read once, at the first
lookup::

    SUITES: Registry[Suite] = Registry("suite", entry_points="spade_eval.suites")
    SUITES.register("echo", Echo())
    SUITES.get("echo")      # the object
    SUITES.get("ecoh")      # RegistryError: unknown suite 'ecoh' (did you mean echo?); ...
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from .errors import RegistryError

__all__ = ["Registry", "RegistryError"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named plug-ins of one ``kind`` (a word for messages: ``"backend"``, ``"suite"``).

    ``entry_points``: the entry-point group read at the first lookup (``None``: none).
    ``convert(name, obj)`` turns what an entry point holds into the registered item, raising
    :class:`RegistryError` when it does not fit (default: the object as it is). ``check(name,
    item)`` runs on every registration and raises :class:`RegistryError` for an item the
    registry must not take.
    """

    def __init__(
        self,
        kind: str,
        *,
        entry_points: str | None = None,
        convert: Callable[[str, object], T] | None = None,
        check: Callable[[str, T], None] | None = None,
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_points
        self._convert = convert
        self._check = check
        self._loaders: dict[str, Callable[[], T]] = {}
        self._loaded: dict[str, T] = {}
        self._entry_points_read = entry_points is None
        self._plugins: set[str] = set()  # the names that came from entry points

    def register(self, name: str, item: T) -> T:
        """Add ``item`` as ``name``; returns it. A name already taken is refused."""
        self._claim(name)
        if self._check is not None:
            self._check(name, item)
        self._loaders[name] = lambda: item
        self._loaded[name] = item
        return item

    def register_lazy(self, name: str, load: Callable[[], T]) -> None:
        """Add ``name`` whose item ``load()`` makes at its first lookup (a module that is slow
        to import, say). A name already taken is refused."""
        self._claim(name)
        self._loaders[name] = load

    def get(self, name: str) -> T:
        """The item registered as ``name``; :class:`RegistryError` naming the choices if none."""
        self._read_entry_points()
        if name not in self._loaders:
            raise self.unknown(name)
        if name not in self._loaded:
            item = self._loaders[name]()
            if self._check is not None:
                self._check(name, item)
            self._loaded[name] = item
        return self._loaded[name]

    def names(self) -> list[str]:
        """Every registered name, in registration order (entry points after the built-ins)."""
        self._read_entry_points()
        return list(self._loaders)

    def unknown(self, name: str) -> RegistryError:
        """The error for a lookup of ``name`` that is not registered (a "did you mean" when a
        registered name is close)."""
        names = self.names()
        near = difflib.get_close_matches(str(name), names, n=1)
        tip = f" (did you mean {near[0]}?)" if near else ""
        return RegistryError(
            f"unknown {self.kind} {name!r}{tip}; choose from {', '.join(names) or '(none)'}"
        )

    def copy(self) -> Registry[T]:
        """A registry with this one's kind, entry-point group, conversion, check and names,
        less those that came from entry points, which it reads again at its first lookup:
        extend it (a test, say) and leave this one as it is."""
        new: Registry[T] = Registry(
            self.kind, entry_points=self.entry_point_group, convert=self._convert, check=self._check
        )
        kept = [n for n in self._loaders if n not in self._plugins]
        new._loaders = {n: self._loaders[n] for n in kept}
        new._loaded = {n: self._loaded[n] for n in kept if n in self._loaded}
        return new

    def __contains__(self, name: object) -> bool:
        self._read_entry_points()
        return name in self._loaders

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def _claim(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise RegistryError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        if name in self._loaders:
            raise RegistryError(f"{self.kind} {name!r} is already registered; pick another name")

    def _read_entry_points(self) -> None:
        if self._entry_points_read:
            return
        self._entry_points_read = True  # once, even if one of them fails below
        for ep in entry_points(group=self.entry_point_group or ""):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, not a traceback
                raise RegistryError(
                    f"entry point {ep.name} = {ep.value} ({self.entry_point_group}) does not "
                    f"import: {type(exc).__name__}: {exc}; fix or uninstall the package"
                ) from None
            item = self._convert(ep.name, obj) if self._convert is not None else obj
            self.register(ep.name, item)  # type: ignore[arg-type]  # unconverted: taken as is
            self._plugins.add(ep.name)
