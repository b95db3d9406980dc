"""The public interface end to end on the process backend: open, reset, step, call, close,
episode limits, recycling, one-off scripts, required layers."""

from __future__ import annotations

import pytest
from conftest import GAME, child_pids, make_env_source
from spade_sandbox import (
    ExecResult,
    InfrastructureError,
    LimitExceeded,
    Limits,
    ReasonCode,
    SandboxConfig,
    SandboxedEnv,
    SandboxError,
    open_env,
    run,
)

pytestmark = pytest.mark.timeout(60)


def test_a_game_plays_through_the_sandbox(config):
    with open_env(GAME, kwargs={"n": 20}, config=config) as env:
        assert isinstance(env, SandboxedEnv) and env.class_name == "GuessEnv"
        obs, info = env.reset(seed=7)
        assert obs == "Guess a number from 1 to 20." and info == {"n": 20}
        answer = env.call("solution")
        assert answer.startswith("\\boxed{")
        obs, reward, terminated, truncated, info = env.step("\\boxed{0}")
        assert (reward, terminated, truncated) == (0.0, False, False) and "higher" in obs
        assert env.step(answer) == ("Correct.", 1.0, True, False, {"turn": 2})


def test_same_seed_same_episode_across_workers(config):
    with open_env(GAME, config=config) as a, open_env(GAME, config=config) as b:
        assert [a.reset(seed=s) and a.call("solution") for s in range(5)] == [
            b.reset(seed=s) and b.call("solution") for s in range(5)
        ]


def test_every_layer_is_reported(config):
    with open_env(GAME, config=config) as env:
        layers = env.layers
    assert set(layers) >= {
        "namespaces",
        "unprivileged_uid",
        "rlimits",
        "seccomp",
        "landlock",
        "import_policy",
    }
    for state in layers.values():
        assert state.startswith(("active", "unavailable: "))


def test_class_name_selection(config):
    two = GAME + "\n\nclass OtherEnv(GuessEnv):\n    pass\n"
    with pytest.raises(SandboxError, match="exactly one class") as caught:
        open_env(two, config=config)
    assert caught.value.reason is ReasonCode.ENV_EXCEPTION
    with open_env(two, class_name="OtherEnv", config=config) as env:
        assert env.class_name == "OtherEnv"
    with pytest.raises(SandboxError, match="no class 'Missing'"):
        open_env(two, class_name="Missing", config=config)


def test_syntax_error_is_reported_with_its_line(config):
    with pytest.raises(SandboxError, match=r"SyntaxError: .*line 2") as caught:
        open_env("x = 1\ndef broken(:\n", config=config)
    assert caught.value.reason is ReasonCode.ENV_EXCEPTION


def test_host_side_argument_checks(config):
    with open_env(GAME, config=config) as env:
        with pytest.raises(ValueError, match="reset"):
            env.step("1")
        env.reset()
        with pytest.raises(TypeError, match="action must be a str"):
            env.step(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="seed"):
            env.reset(seed="1")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="public method"):
            env.call("_private")
        with pytest.raises(SandboxError, match="no public method 'nothing'"):
            env.call("nothing")
    with pytest.raises(ValueError, match="closed"):
        env.reset()
    with pytest.raises(TypeError, match="kwargs must be JSON"):
        open_env(GAME, kwargs={"n": object()}, config=config)


def test_max_steps_per_episode(config):
    tight = config.replace(limits=Limits(**{**config.limits.to_dict(), "max_steps": 3}))
    with open_env(GAME, config=tight) as env:
        env.reset(seed=1)
        for _ in range(3):
            env.step("\\boxed{0}")
        with pytest.raises(LimitExceeded, match="max_steps=3") as caught:
            env.step("\\boxed{0}")
        assert caught.value.reason is ReasonCode.LIMIT_EXCEEDED
        env.reset(seed=1)
        env.step("\\boxed{0}")  # a new episode has a new budget


def test_episode_wall_budget(config):
    tight = config.replace(
        limits=Limits(**{**config.limits.to_dict(), "episode_wall_s": 0.6, "call_wall_s": 5.0})
    )
    src = make_env_source(
        header="import time", step="time.sleep(0.4)\nreturn 'slept', 0.0, False, False, {}"
    )
    with open_env(src, config=tight) as env:
        env.reset()
        env.step("a")
        with pytest.raises(LimitExceeded, match="episode_wall_s"):
            env.step("b")


def test_reset_after_a_fatal_error_moves_to_a_fresh_worker(config):
    src = make_env_source(
        step="if action == 'loop':\n    while True: pass\nreturn 'fine', 0.0, False, False, {}"
    )
    with open_env(src, config=config) as env:
        env.reset()
        first_dir = env.work_dir
        with pytest.raises(SandboxError) as caught:
            env.step("loop")
        assert caught.value.reason is ReasonCode.TIMEOUT
        with pytest.raises(SandboxError, match="call reset"):
            env.step("again")
        env.reset()
        assert env.work_dir != first_dir
        assert env.step("ok")[0] == "fine"


def test_recycled_after_n_episodes(config):
    every_two = config.replace(recycle_after_episodes=2)
    with open_env(GAME, config=every_two) as env:
        dirs = []
        for seed in range(5):
            env.reset(seed=seed)
            dirs.append(env.work_dir)
        assert dirs[0] == dirs[1] != dirs[2] == dirs[3] != dirs[4]
        assert env.episodes == 5


def test_close_is_idempotent_and_reaps(config):
    before = child_pids()
    env = open_env(GAME, config=config)
    assert child_pids() - before
    env.close()
    env.close()
    assert child_pids() == before


def test_run_a_script(config):
    result = run("import json, sys\nprint(json.dumps({'echo': input()}))", config=config.replace(
        allowed_imports=config.allowed_imports | {"sys"}), stdin="hello\n")  # fmt: skip
    assert isinstance(result, ExecResult) and result.ok
    assert (
        result.stdout == '{"echo": "hello"}\n' and result.returncode == 0 and result.reason is None
    )


def test_run_reports_failures_as_data(config):
    failing = run("raise ValueError('bad input')", config=config)
    assert (
        failing.returncode == 1
        and "ValueError: bad input" in failing.stderr
        and failing.reason is None
    )
    assert not failing.ok
    exiting = run("raise SystemExit(4)", config=config)
    assert exiting.returncode == 4
    hanging = run("while True: pass", config=config)
    assert hanging.reason is ReasonCode.TIMEOUT and hanging.returncode == -9
    forbidden = run("import socket", config=config)
    assert forbidden.reason is ReasonCode.FORBIDDEN_IMPORT
    flooding = run("while True: print('x' * 1000)", config=config)
    assert (
        flooding.reason is ReasonCode.OUTPUT_TOO_LARGE
        and len(flooding.stdout) == config.limits.max_output_bytes
    )


def test_required_layer_that_is_missing_is_an_infrastructure_error(config, monkeypatch):
    from spade_sandbox import process

    monkeypatch.setattr(
        process, "bwrap_status", lambda: (None, "unavailable: disabled for this test")
    )
    strict = config.replace(require_layers=frozenset({"namespaces"}))
    with pytest.raises(
        SandboxError, match="namespaces: unavailable: disabled for this test"
    ) as caught:
        open_env(GAME, config=strict)
    assert caught.value.is_infrastructure


def test_without_bubblewrap_it_falls_back_and_logs(config, monkeypatch, caplog):
    from spade_sandbox import process, protocol

    monkeypatch.setattr(
        process, "bwrap_status", lambda: (None, "unavailable: disabled for this test")
    )
    monkeypatch.setattr(protocol, "_warned", set())
    with caplog.at_level("WARNING", logger="spade_sandbox"):
        with open_env(GAME, config=config) as env:
            env.reset(seed=1)
            assert env.layers["namespaces"] == "unavailable: disabled for this test"
            assert env.layers["seccomp"].startswith("active")
            assert env.step(env.call("solution"))[1] == 1.0
    assert "namespaces is unavailable: disabled for this test" in caplog.text


def test_config_from_environment_is_the_default(monkeypatch):
    monkeypatch.setenv("SPADE_SANDBOX_MAX_STEPS", "1")
    with open_env(GAME) as env:
        assert env.config == SandboxConfig.from_env()
        env.reset()
        env.step("x")
        with pytest.raises(LimitExceeded):
            env.step("x")


def test_source_compiles_with_its_own_future_flags(config):
    # The worker module uses postponed annotations; the environment's code must not inherit them.
    src = make_env_source(
        step="def f(x: int): pass\nreturn repr(f.__annotations__['x']), 0.0, False, False, {}"
    )
    with open_env(src, config=config) as env:
        env.reset()
        assert env.step("a")[0] == "<class 'int'>"


def test_forbidden_import_names_module_and_line(config):
    src = make_env_source(
        step="import json\nfrom subprocess import run\nreturn 'x', 0.0, False, False, {}"
    )
    with pytest.raises(SandboxError, match=r"line 13 imports 'subprocess'") as caught:
        open_env(src, config=config)
    assert caught.value.reason is ReasonCode.FORBIDDEN_IMPORT


def test_spade_sandbox_bwrap_off_hides_bubblewrap_and_a_typo_is_named(config, monkeypatch):
    from spade_sandbox import process

    process.bwrap_status.cache_clear()
    monkeypatch.setenv("SPADE_SANDBOX_BWRAP", "off")
    try:
        assert SandboxConfig.from_env({"SPADE_SANDBOX_BWRAP": "off"}) == SandboxConfig()
        with open_env(GAME, config=config) as env:
            env.reset(seed=1)
            assert env.layers["namespaces"] == "unavailable: turned off by SPADE_SANDBOX_BWRAP=off"
            assert env.layers["seccomp"].startswith("active")
            assert env.step(env.call("solution"))[1] == 1.0
        monkeypatch.setenv("SPADE_SANDBOX_BWRAP", "maybe")
        process.bwrap_status.cache_clear()
        with pytest.raises(ValueError, match="SPADE_SANDBOX_BWRAP='maybe' is not 'auto' or 'off'"):
            SandboxConfig.from_env({"SPADE_SANDBOX_BWRAP": "maybe"})
        with pytest.raises(InfrastructureError, match="SPADE_SANDBOX_BWRAP='maybe'"):
            open_env(GAME, config=config)
    finally:
        process.bwrap_status.cache_clear()


def test_an_environment_nobody_closes_is_closed_when_collected_and_at_exit(config, tmp_path):
    import gc
    import os
    import subprocess
    import sys

    here = config.replace(work_root=str(tmp_path))
    env = open_env(GAME, config=here)
    env.reset(seed=0)
    work_dir = env.work_dir
    assert work_dir and os.path.isdir(work_dir)
    del env
    gc.collect()
    assert not os.path.exists(work_dir)
    code = (
        "import sys\n"
        "from spade_sandbox import SandboxConfig, open_env\n"
        "env = open_env(sys.argv[1], config=SandboxConfig(work_root=sys.argv[2]))\n"
        "env.reset(seed=0)\n"
        "print(env.work_dir, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, GAME, str(tmp_path)], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(tmp_path))
    assert os.listdir(tmp_path) == []  # the worker's work dir went with it
