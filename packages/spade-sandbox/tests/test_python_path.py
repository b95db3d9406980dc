"""``backend_options["python_path"]``: an allowed third-party module from a read-only directory."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest
from spade_sandbox import (
    DEFAULT_ALLOWED_IMPORTS,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    open_env,
)

SOURCE = textwrap.dedent(
    """
    import thirdparty


    class PathEnv:
        def __init__(self, max_turns=10):
            self.max_turns = max_turns

        def reset(self, seed=None):
            return f"double of {seed} is {thirdparty.double(seed)}", {}

        def step(self, action):
            if action == "write":
                with open(thirdparty.__file__, "a") as fh:
                    fh.write("# changed")
            if action == "os":
                return str(thirdparty.os_name()), 0.0, True, False, {}
            return "done", 1.0, True, False, {}

        def solution(self):
            return "x"

        def close(self):
            pass
    """
)


@pytest.fixture
def package_dir(tmp_path):
    pkg = tmp_path / "site" / "thirdparty"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os\n\ndef double(x):\n    return 2 * x\n\ndef os_name():\n    return os.name\n"
    )
    return tmp_path / "site"


def config_for(site, **options) -> SandboxConfig:
    return SandboxConfig(
        allowed_imports=DEFAULT_ALLOWED_IMPORTS | {"thirdparty"},
        backend_options={"python_path": str(site), **options},
    )


@pytest.mark.parametrize("bwrap", [True, False], ids=["bwrap", "no-bwrap"])
def test_an_allowed_module_imports_from_python_path(package_dir, bwrap, monkeypatch):
    from spade_sandbox import process

    if not bwrap:  # the worker started directly: Landlock alone grants the read
        monkeypatch.setattr(process, "bwrap_status", lambda: (None, "unavailable: test"))
    elif process.bwrap_status()[0] is None:
        pytest.skip("bubblewrap is not installed here")
    env = open_env(SOURCE, config=config_for(package_dir))
    try:
        assert env.reset(seed=21)[0] == "double of 21 is 42"
        # the module's own imports use the real importer (os here), the environment's do not
        assert env.step("os")[0] == "posix"
    finally:
        env.close()


def test_the_directory_is_read_only_and_other_imports_stay_refused(package_dir):
    config = config_for(package_dir)
    env = open_env(SOURCE, config=config)
    try:
        env.reset(seed=1)
        with pytest.raises(SandboxError):
            env.step("write")
    finally:
        env.close()
    assert "# changed" not in (package_dir / "thirdparty" / "__init__.py").read_text()
    with pytest.raises(SandboxError) as info:
        open_env("import os\n" + SOURCE, config=config)
    assert info.value.reason.value == "forbidden_import"


def test_without_python_path_the_module_is_not_found(package_dir):
    config = dataclasses.replace(config_for(package_dir), backend_options={})
    with pytest.raises(SandboxError, match="No module named 'thirdparty'"):
        open_env(SOURCE, config=config)


def test_pool_workers_get_it_from_the_zygote(package_dir):
    with SandboxPool(config_for(package_dir), size=1) as pool:
        env = pool.open_env(SOURCE)
        try:
            assert env.reset(seed=4)[0] == "double of 4 is 8"
        finally:
            env.close()
