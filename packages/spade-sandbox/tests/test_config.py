"""Limits and SandboxConfig: validation, environment variables, strict keys; errors and the
backend registry."""

from __future__ import annotations

import pickle

import pytest
import spade_sandbox
from spade_sandbox import (
    DEFAULT_ALLOWED_IMPORTS,
    Backend,
    Limits,
    ReasonCode,
    SandboxConfig,
    SandboxError,
    SandboxTimeout,
    get_backend,
    register_backend,
)
from spade_sandbox.errors import error_for


def test_limits_defaults_match_the_published_interface():
    limits = Limits()
    assert (limits.call_wall_s, limits.episode_wall_s, limits.cpu_s, limits.mem_mib) == (
        5.0,
        120.0,
        10,
        512,
    )
    assert (limits.max_procs, limits.max_file_mib, limits.max_open_files) == (16, 16, 64)
    assert (limits.max_output_kib, limits.max_steps) == (256, 1000)


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("call_wall_s", 0, ValueError),
        ("call_wall_s", float("inf"), ValueError),
        ("call_wall_s", "5", TypeError),
        ("mem_mib", 1.5, TypeError),
        ("mem_mib", 16, ValueError),
        ("max_steps", -1, ValueError),
        ("max_steps", True, TypeError),
        ("max_open_files", 3, ValueError),
    ],
)
def test_limits_reject_bad_values_naming_the_field(field, value, error):
    with pytest.raises(error, match=field):
        Limits(**{field: value})


def test_limits_are_frozen_and_ints_become_floats_for_seconds():
    limits = Limits(call_wall_s=2)
    assert isinstance(limits.call_wall_s, float)
    with pytest.raises(AttributeError):
        limits.mem_mib = 1  # type: ignore[misc]


def test_config_defaults_are_safe():
    config = SandboxConfig()
    assert config.backend == "process"
    assert {"os", "sys", "socket", "subprocess", "ctypes", "pickle", "importlib"}.isdisjoint(
        config.allowed_imports
    )
    assert {
        "math",
        "random",
        "re",
        "json",
        "itertools",
        "collections",
        "dataclasses",
        "string",
        "typing",
    } <= (config.allowed_imports)


def test_config_rejects_unknown_layer_and_bad_types():
    with pytest.raises(ValueError, match="unknown layer"):
        SandboxConfig(require_layers=frozenset({"magic"}))
    with pytest.raises(TypeError, match="allowed_imports"):
        SandboxConfig(allowed_imports="math")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits"):
        SandboxConfig(limits={"mem_mib": 5})  # type: ignore[arg-type]


def test_from_env_reads_variables():
    config = SandboxConfig.from_env(
        {
            "SPADE_SANDBOX_MEM_MIB": "256",
            "SPADE_SANDBOX_CALL_WALL_S": "0.5",
            "SPADE_SANDBOX_EXTRA_IMPORTS": "zlib, base64",
            "SPADE_SANDBOX_REQUIRE_LAYERS": "seccomp,landlock",
            "SPADE_SANDBOX_OPT_IMAGE": "spade-sandbox:latest",
            "HOME": "/ignored",
        }
    )
    assert config.limits.mem_mib == 256 and config.limits.call_wall_s == 0.5
    assert config.allowed_imports == DEFAULT_ALLOWED_IMPORTS | {"zlib", "base64"}
    assert config.require_layers == {"seccomp", "landlock"}
    assert config.backend_options == {"image": "spade-sandbox:latest"}
    assert SandboxConfig.from_env({"SPADE_SANDBOX_REQUIRE_LAYERS": "all"}).require_layers == set(
        spade_sandbox.LAYERS
    )


def test_from_env_rejects_unknown_and_malformed_variables():
    with pytest.raises(ValueError, match="SPADE_SANDBOX_MEM_MB"):
        SandboxConfig.from_env({"SPADE_SANDBOX_MEM_MB": "1"})
    with pytest.raises(ValueError, match=r"SPADE_SANDBOX_MEM_MIB='lots' is not an integer"):
        SandboxConfig.from_env({"SPADE_SANDBOX_MEM_MIB": "lots"})


def test_from_dict_rejects_unknown_keys_also_inside_limits():
    config = SandboxConfig.from_dict({"backend": "process", "limits": {"mem_mib": 128}})
    assert config.limits.mem_mib == 128
    with pytest.raises(ValueError, match="backnd"):
        SandboxConfig.from_dict({"backnd": "process"})
    with pytest.raises(ValueError, match="mem_mb"):
        SandboxConfig.from_dict({"limits": {"mem_mb": 128}})


def test_config_pickles_and_compares():
    config = SandboxConfig(limits=Limits(mem_mib=128), backend_options={"image": "x"})
    assert pickle.loads(pickle.dumps(config)) == config
    assert config.replace(backend="docker").backend == "docker"


def test_errors_pickle_keep_their_family_and_reason():
    for reason in ReasonCode:
        err = error_for(reason, f"message for {reason.value}")
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and back.reason is reason and back.message == err.message
        assert isinstance(back, SandboxError) and isinstance(back, RuntimeError)
        assert back.is_infrastructure is (reason is ReasonCode.INFRASTRUCTURE)
    assert isinstance(error_for("timeout", "t"), TimeoutError) and isinstance(
        error_for("timeout", "t"), SandboxTimeout
    )
    assert isinstance(error_for("memory", "m"), MemoryError)
    assert error_for("no-such-reason", "x").reason is ReasonCode.PROTOCOL_ERROR


def test_reason_codes_are_the_published_strings():
    assert {r.value for r in ReasonCode} == {
        "timeout", "memory", "crashed", "forbidden_syscall", "forbidden_import", "bad_return",
        "output_too_large", "protocol_error", "env_exception", "limit_exceeded", "disk_quota",
        "infrastructure",
    }  # fmt: skip
    assert ReasonCode("timeout") == "timeout"


def test_registry_has_both_backends_and_refuses_duplicates():
    assert {"process", "docker"} <= set(spade_sandbox.backend_names())
    assert isinstance(get_backend("process"), Backend)
    assert get_backend("process") is get_backend("process")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("process", spade_sandbox.ProcessBackend)
    with pytest.raises(ValueError, match="unknown sandbox backend 'nope'; registered: .*process"):
        get_backend("nope")
