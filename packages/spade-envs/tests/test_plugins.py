"""The one registry (spade_envs.plugins): duplicates refused, unknown names answered with the
choices, lazy items, checks, and plug-ins added from outside through an entry-point group."""

from __future__ import annotations

import textwrap

import pytest
import spade_envs as se
from spade_envs.plugins import Registry, RegistryError


def test_register_get_and_refuse_duplicates():
    reg: Registry[int] = Registry("widget")
    assert reg.register("one", 1) == 1
    reg.register("two", 2)
    assert reg.get("two") == 2 and reg.names() == ["one", "two"] and "one" in reg
    with pytest.raises(RegistryError, match="widget 'one' is already registered"):
        reg.register("one", 11)
    assert reg.get("one") == 1  # the first registration stands
    with pytest.raises(RegistryError, match="non-empty string name"):
        reg.register("", 3)
    assert isinstance(RegistryError("x"), ValueError) and se.RegistryError is RegistryError


def test_unknown_name_is_one_line_with_a_suggestion_and_the_choices():
    reg: Registry[str] = Registry("suite")
    for name in ("math", "science"):
        reg.register(name, name)
    with pytest.raises(RegistryError) as err:
        reg.get("maths")
    assert str(err.value) == "unknown suite 'maths' (did you mean math?); choose from math, science"
    assert "\n" not in str(err.value)
    with pytest.raises(RegistryError, match="unknown suite 'zzz'; choose from math, science"):
        reg.get("zzz")


def test_lazy_items_load_once_and_checks_run_on_them():
    calls = []

    def load() -> str:
        calls.append(1)
        return "loaded"

    def check(name: str, item: str) -> None:
        if item == "bad":
            raise RegistryError(f"{name}: bad item")

    reg: Registry[str] = Registry("thing", check=check)
    reg.register_lazy("slow", load)
    assert calls == [] and reg.names() == ["slow"]
    assert reg.get("slow") == reg.get("slow") == "loaded" and calls == [1]
    with pytest.raises(RegistryError, match="x: bad item"):
        reg.register("x", "bad")
    assert "x" not in reg  # refused, not half-registered
    reg.register_lazy("later", lambda: "bad")
    with pytest.raises(RegistryError, match="later: bad item"):
        reg.get("later")
    with pytest.raises(RegistryError, match="already registered"):
        reg.register_lazy("slow", load)


def _plugin(tmp_path, monkeypatch, module: str, body: str, group: str, line: str) -> None:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
    dist = tmp_path / "ext_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ext-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_points_extend_a_registry_from_outside(tmp_path, monkeypatch):
    _plugin(tmp_path, monkeypatch, "ext_widget", "VALUE = 41\n", "spade_test.widgets",
            "ext = ext_widget:VALUE")  # fmt: skip

    def convert(name: str, obj: object) -> int:
        if not isinstance(obj, int):
            raise RegistryError(f"entry point {name} is not an int")
        return obj + 1

    reg: Registry[int] = Registry("widget", entry_points="spade_test.widgets", convert=convert)
    reg.register("builtin", 0)
    assert reg.names() == ["builtin", "ext"] and reg.get("ext") == 42
    fresh = reg.copy()  # the built-in kept, the entry point read again, this one untouched
    fresh.register("extra", 7)
    assert fresh.names() == ["builtin", "extra", "ext"] and fresh.get("ext") == 42
    assert "extra" not in reg
    clash: Registry[int] = Registry("widget", entry_points="spade_test.widgets")
    clash.register("ext", 0)  # an entry point may not take a name already registered
    with pytest.raises(RegistryError, match="widget 'ext' is already registered"):
        clash.get("ext")


def test_a_plugin_that_does_not_import_is_named(tmp_path, monkeypatch):
    _plugin(tmp_path, monkeypatch, "ext_broken", "raise ImportError('no numpy here')\n",
            "spade_test.broken", "bad = ext_broken:X")  # fmt: skip
    reg: Registry[object] = Registry("widget", entry_points="spade_test.broken")
    with pytest.raises(RegistryError, match=r"entry point bad = ext_broken:X .* no numpy here"):
        reg.names()
