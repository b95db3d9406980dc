"""Docker backend pieces that need no engine: option parsing, the seccomp profile, the
layers it reports, and a clear infrastructure error when the engine is unreachable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import GAME
from spade_sandbox import InfrastructureError, Limits, SandboxConfig, get_backend, open_env, wire
from spade_sandbox.docker_backend import (
    _BOOTSTRAP,
    IN_WORKER_LAYERS,
    DockerBackend,
    DockerOptions,
    _worker_sources,
    seccomp_profile,
)


def test_registered_as_docker():
    assert isinstance(get_backend("docker"), DockerBackend)


def test_options_defaults_and_parsing():
    assert DockerOptions.from_options({}) == DockerOptions()
    parsed = DockerOptions.from_options(
        {"image": "x:y", "cpus": "0.5", "work_mib": "8", "worker_layers": "seccomp, rlimits"}
    )
    assert parsed == DockerOptions(
        image="x:y", cpus=0.5, work_mib=8, worker_layers=("seccomp", "rlimits")
    )
    assert DockerOptions.from_options({"worker_layers": "none"}).worker_layers == ()
    assert DockerOptions().worker_layers == IN_WORKER_LAYERS


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"imag": "x"},
            r"unknown Docker backend option\(s\) \['imag'\]; known: cpus, image, work_mib, worker_layers",
        ),
        ({"cpus": "many"}, r"cpus='many' is not a number"),
        ({"cpus": "0"}, r"cpus must be between"),
        ({"work_mib": "1.5"}, r"work_mib='1.5' is not an integer"),
        ({"work_mib": "0"}, r"work_mib must be at least 1"),
        ({"image": " "}, r"image must name an image"),
        ({"worker_layers": "seccomp,namespaces"}, r"unknown layer\(s\) \['namespaces'\]"),
    ],
)
def test_option_mistakes_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        DockerOptions.from_options(options)


def test_option_mistake_reaches_the_user_as_one_line_infrastructure_error():
    with pytest.raises(InfrastructureError) as caught:
        open_env(GAME, config=SandboxConfig(backend="docker", backend_options={"imag": "x"}))
    assert caught.value.is_infrastructure and "\n" not in str(caught.value)
    assert "'imag'" in caught.value.message


def test_options_from_environment_variables():
    config = SandboxConfig.from_env(
        {"SPADE_SANDBOX_BACKEND": "docker", "SPADE_SANDBOX_OPT_CPUS": "2"}
    )
    assert DockerOptions.from_options(config.backend_options).cpus == 2.0


def test_seccomp_profile_is_an_allow_list_without_dangerous_calls():
    profile = json.loads(json.dumps(seccomp_profile()))
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {name for rule in profile["syscalls"] for name in rule["names"]}
    assert all(rule["action"] == "SCMP_ACT_ALLOW" for rule in profile["syscalls"])
    for name in ("socket", "connect", "ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "kexec_load",
                 "perf_event_open", "io_uring_setup", "setuid", "init_module", "process_vm_readv"):  # fmt: skip
        assert name not in allowed, name
    for name in (
        "read",
        "write",
        "mmap",
        "clone",
        "futex",
        "execve",
        "prctl",
        "landlock_restrict_self",
    ):
        assert name in allowed, name


def test_host_layers_need_no_engine():
    layers = DockerBackend().host_layers(SandboxConfig(backend="docker"))
    assert layers["namespaces"].startswith("active: Docker container")
    assert layers["cgroup_limits"] == "active: memory 592 MiB (no swap), pids 16, cpus 1"


def test_unreachable_engine_is_a_one_line_infrastructure_error(monkeypatch, tmp_path):
    pytest.importorskip(
        "docker", reason="the docker SDK is not installed (extra: spade-sandbox[docker])"
    )
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(InfrastructureError) as caught:
        DockerBackend().start(SandboxConfig(backend="docker"))
    message = str(caught.value)
    assert (
        "cannot reach a Docker engine" in message
        and "dockerd --bridge=none --iptables=false" in message
    )
    assert "\n" not in message


def test_the_bootstrap_runs_the_worker_from_its_sources_alone(tmp_path):
    # What the container runs, here on the host interpreter with no layers requested: every
    # worker module arrives as an argument (none is importable from a file), and a game plays.
    proc = subprocess.Popen(
        [sys.executable, "-S", "-B", "-c", _BOOTSTRAP, *_worker_sources()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path, env={},
    )  # fmt: skip
    assert proc.stdin and proc.stdout

    def call(rid: int, message: dict) -> dict:
        wire.write_frame(proc.stdin.fileno(), {**message, "id": rid})
        return wire.read_frame(proc.stdout.fileno(), 1 << 20)  # type: ignore[return-value]

    try:
        init = {"op": "init", "limits": Limits().to_dict(), "allowed_imports": ["random"],
                "work_dir": str(tmp_path), "apply": []}  # fmt: skip
        assert call(1, init)["value"]["layers"]["import_policy"] == "active"
        assert call(2, {"op": "open", "source": GAME})["value"] == {"class_name": "GuessEnv"}
        assert call(3, {"op": "reset", "seed": 3})["value"][0].startswith("Guess a number")
        assert call(4, {"op": "step", "action": "x"})["value"][1] == 0.0
        assert call(5, {"op": "close"}) == {"id": 5, "ok": True, "value": None}
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
