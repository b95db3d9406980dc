"""The published interface other packages code against."""

import inspect
from importlib.metadata import metadata

import spade_sandbox

PUBLISHED = {
    "Limits", "SandboxConfig", "ReasonCode", "SandboxError", "ExecResult", "SandboxedEnv",
    "open_env", "run", "SandboxPool", "Backend", "register_backend", "get_backend", "doctor_report",
}  # fmt: skip


def test_version_matches_installed_metadata():
    assert spade_sandbox.__version__ == metadata("spade-sandbox")["Version"]


def test_public_names_exist():
    for name in spade_sandbox.__all__:
        assert hasattr(spade_sandbox, name), name
    assert PUBLISHED <= set(spade_sandbox.__all__)


def test_published_signatures():
    assert list(inspect.signature(spade_sandbox.open_env).parameters) == [
        "source",
        "class_name",
        "kwargs",
        "config",
    ]
    assert list(inspect.signature(spade_sandbox.run).parameters) == [
        "script_source",
        "config",
        "stdin",
    ]
    assert list(inspect.signature(spade_sandbox.SandboxPool).parameters) == ["config", "size"]
    pool_open = inspect.signature(spade_sandbox.SandboxPool.open_env).parameters
    assert list(pool_open)[1:] == ["source", "class_name", "kwargs", "config"]
    for method in ("reset", "step", "call", "close", "__enter__", "__exit__"):
        assert callable(getattr(spade_sandbox.SandboxedEnv, method))


def test_public_callables_are_documented():
    for name in spade_sandbox.__all__:
        obj = getattr(spade_sandbox, name)
        if callable(obj) and not name.startswith("_"):
            assert inspect.getdoc(obj), f"{name} has no docstring"
