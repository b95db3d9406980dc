"""The Docker backend against a real engine: the same protocol and results as the process
backend, and the container's own walls (no network, read-only root, uid 65534, no
capabilities, memory and pids cgroups, seccomp) shown with the worker's in-process layers
switched off, so each wall is seen holding alone. Skipped, with the reason, where no
engine is reachable or the image is not built. Afterwards no container of this process is
left, no pump thread runs and the fd count is back at its baseline.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import GAME, OS_MODULES, child_pids, make_env_source, open_fds
from spade_sandbox import (
    DEFAULT_ALLOWED_IMPORTS,
    LAYERS,
    InfrastructureError,
    Limits,
    ReasonCode,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    doctor_report,
    get_backend,
    open_env,
    run,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(120)]

R = ReasonCode
NO_WORKER_LAYERS = {"worker_layers": "none"}


@pytest.fixture(scope="module")
def engine():
    """A docker SDK client of a reachable engine that has the sandbox image, or a skip."""
    docker = pytest.importorskip(
        "docker", reason="the docker SDK is not installed (extra: spade-sandbox[docker])"
    )
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        pytest.skip(
            f"no Docker engine reachable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        )
    from spade_sandbox.docker_backend import DEFAULT_IMAGE

    try:
        client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(
            f"image {DEFAULT_IMAGE} not built: run packages/spade-sandbox/docker/build-image.sh"
        )
    yield client
    client.close()  # now, not whenever it is collected (that would move other modules' fd counts)


def worker_containers(client, owner: str) -> list[dict]:
    """Worker containers of the host process `owner` (always the same low-level call, so the
    SDK's per-URL connection cache holds one connection for it)."""
    from spade_sandbox.docker_backend import LABEL

    return [
        c
        for c in client.api.containers(all=True, filters={"label": LABEL})
        if c["Labels"][LABEL] == owner
    ]


def our_containers(client) -> list[str]:
    """Ids of this process's worker containers."""
    from spade_sandbox.docker_backend import owner_label

    return [c["Id"] for c in worker_containers(client, owner_label())]


def pump_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("spade-docker-")]


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind(engine):
    our_containers(engine)  # its connection to the engine is open before the baseline
    fds_before = open_fds()
    children_before = child_pids()
    yield
    assert our_containers(engine) == [], "worker containers were left behind"
    assert pump_threads() == [], "stream pump threads were left running"
    get_backend(
        "docker"
    ).client().close()  # the SDK's idle engine connections (see DockerBackend.client)
    assert open_fds() == fds_before, "file descriptors leaked"
    assert child_pids() == children_before


@pytest.fixture(scope="module")
def docker_config(config) -> SandboxConfig:
    # Container start-up is slower than a fork; the per-call limit stays as in conftest.
    return config.replace(backend="docker", start_timeout_s=30.0)


@pytest.fixture(scope="module")
def bare(docker_config) -> SandboxConfig:
    """Only the container's walls: no in-worker layers, OS modules importable."""
    return docker_config.replace(
        backend_options=NO_WORKER_LAYERS, allowed_imports=DEFAULT_ALLOWED_IMPORTS | OS_MODULES
    )


def script(source: str, config: SandboxConfig) -> str:
    result = run(source, config=config)
    assert result.reason is None and result.returncode == 0, result
    return result.stdout


# -- the protocol through a container -----------------------------------------------------
def test_game_plays_through_a_container(engine, docker_config):
    strict = docker_config.replace(require_layers=frozenset(LAYERS))
    with open_env(GAME, config=strict, kwargs={"n": 50}) as env:
        assert env.layers["namespaces"].startswith("active: Docker container")
        assert all(
            env.layers[name].startswith("active")
            for name in ("seccomp", "landlock", "rlimits", "unprivileged_uid")
        )
        assert len(our_containers(engine)) == 1
        obs, info = env.reset(seed=7)
        assert obs == "Guess a number from 1 to 50." and info == {"n": 50}
        answer = env.call("solution")
        assert env.step("\\boxed{0}")[1:4] == (0.0, False, False)
        assert env.step(answer) == ("Correct.", 1.0, True, False, {"turn": 2})
    assert our_containers(engine) == []


def test_same_transcripts_as_the_process_backend(docker_config):
    actions = ["\\boxed{5}", "\\boxed{2}", "nonsense", "\\boxed{9}"]

    def transcript(config):
        lines = []
        with open_env(GAME, config=config) as env:
            for seed in range(4):
                lines.append(env.reset(seed=seed))
                lines += [env.step(a) for a in actions]
                lines.append(env.call("solution"))
        return lines

    assert transcript(docker_config) == transcript(docker_config.replace(backend="process"))


FAULTS = {
    "infinite loop": (make_env_source(step="while True: pass"), "step", R.TIMEOUT),
    "memory bomb": (make_env_source(step="x = bytearray(10**10)"), "step", R.MEMORY),
    "raises": (make_env_source(step="raise KeyError('gone')"), "step", R.ENV_EXCEPTION),
    "nan reward": (
        make_env_source(step="return 'o', float('nan'), False, False, {}"),
        "step",
        R.BAD_RETURN,
    ),
    "wrong tuple": (make_env_source(reset="return 'only the observation'"), "reset", R.BAD_RETURN),
    "huge observation": (
        make_env_source(step="return 'x' * 10**6, 0.0, False, False, {}"),
        "step",
        R.OUTPUT_TOO_LARGE,
    ),
    "forbidden import": ("import socket\n" + make_env_source(), "open", R.FORBIDDEN_IMPORT),
    "exit mid-step": (make_env_source(header="import os", step="os._exit(3)"), "step", R.CRASHED),
    "fork": (make_env_source(header="import os", step="os.fork()"), "step", R.FORBIDDEN_SYSCALL),
    "sys.exit": (make_env_source(header="import sys", step="sys.exit(0)"), "step", R.CRASHED),
    "garbage on the channel": (
        make_env_source(
            header="import os",
            step="for fd in range(3, 12):\n    try: os.write(fd, b'not a frame')\n    except OSError: pass\nreturn 'x', 0.0, False, False, {}",
        ),
        "step",
        R.PROTOCOL_ERROR,
    ),
    "huge frame header": (
        make_env_source(
            header="import os",
            step="for fd in range(3, 12):\n    try: os.write(fd, b'\\xff\\xff\\xff\\xff')\n    except OSError: pass\nreturn 'x', 0.0, False, False, {}",
        ),
        "step",
        R.PROTOCOL_ERROR,
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_faults_get_the_same_reason_on_both_backends(fault, docker_config):
    source, op, expected = FAULTS[fault]
    permissive = frozenset(DEFAULT_ALLOWED_IMPORTS | {"os", "sys"})

    def reason(config):
        with pytest.raises(SandboxError) as caught:
            with open_env(source, config=config.replace(allowed_imports=permissive)) as env:
                if op != "open":
                    env.reset(seed=0)
                if op == "step":
                    env.step("go")
        assert not caught.value.is_infrastructure, caught.value
        return caught.value.reason

    assert reason(docker_config) is expected
    assert reason(docker_config.replace(backend="process")) is expected


def test_stderr_noise_does_not_corrupt_the_channel(docker_config):
    # stdout and stderr share the attach socket; a flood on fd 2 must stay out of the replies.
    source = make_env_source(
        header="import os",
        step="os.write(2, b'E' * 200000)\nreturn 'y' * 60000, 0.5, False, False, {'k': 1}",
    )
    with open_env(
        source, config=docker_config.replace(allowed_imports=DEFAULT_ALLOWED_IMPORTS | {"os"})
    ) as env:
        env.reset(seed=0)
        for _ in range(3):
            assert env.step("go") == ("y" * 60000, 0.5, False, False, {"k": 1})


def test_run_a_script(docker_config):
    result = run(
        "import json\nprint(json.dumps(sorted(set(input().split()))))",
        config=docker_config,
        stdin="b a b",
    )
    assert result.ok and result.stdout == '["a", "b"]\n'


# -- deadlines: killed from outside, the environment recovers in a fresh container -------
def test_timeout_kills_the_container_and_reset_recovers(engine, docker_config):
    source = make_env_source(
        step='if action == "hang":\n    sum(range(10**13))\nreturn "ok", 1.0, True, False, {}'
    )
    with open_env(source, config=docker_config) as env:
        env.reset(seed=0)
        first = our_containers(engine)[0]
        started = time.monotonic()
        with pytest.raises(SandboxError) as caught:
            env.step("hang")
        assert caught.value.reason is R.TIMEOUT
        assert time.monotonic() - started < docker_config.limits.call_wall_s + 3
        assert first not in our_containers(engine)
        env.reset(seed=1)
        assert env.step("fine") == ("ok", 1.0, True, False, {})


# -- the container's own walls ---------------------------------------------------------
def test_memory_cgroup_kills_a_bomb_without_rlimits(docker_config):
    config = docker_config.replace(
        backend_options={"worker_layers": "unprivileged_uid,landlock,seccomp"}
    )
    source = make_env_source(step="x = []\nwhile True: x.append('m' * 10**6)")
    with pytest.raises(SandboxError) as caught:
        with open_env(source, config=config) as env:
            assert env.layers["rlimits"] == "unavailable: not requested"
            env.reset()
            env.step("go")
    assert caught.value.reason is R.MEMORY
    assert "container" in caught.value.message


def test_no_network_inside(bare):
    out = script(
        "import socket\n"
        "try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    print('socket made')\n"
        "except OSError as e:\n    print('socket refused', e.errno)\n"
        "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))\n",
        bare,
    )
    assert out == "socket refused 1\n['lo']\n"


def test_connect_with_default_layers_is_forbidden_syscall(docker_config):
    permissive = docker_config.replace(allowed_imports=DEFAULT_ALLOWED_IMPORTS | {"socket"})
    source = make_env_source(
        header="import socket", step="socket.create_connection(('127.0.0.1', 22), timeout=1)"
    )
    with pytest.raises(SandboxError) as caught:
        with open_env(source, config=permissive) as env:
            env.reset()
            env.step("go")
    assert caught.value.reason is R.FORBIDDEN_SYSCALL


def test_root_is_read_only_and_work_dir_writable(bare):
    out = script(
        "import os\n"
        "for path in ('/etc/x', '/usr/x', '/x', '/opt/x'):\n"
        "    try:\n        open(path, 'w')\n        print(path, 'written')\n"
        "    except OSError as e:\n        print(path, e.errno)\n"
        "open('/work/x', 'w').write('ok'); print(os.getcwd(), open('/work/x').read())\n",
        bare,
    )
    assert out.splitlines() == ["/etc/x 30", "/usr/x 30", "/x 30", "/opt/x 30", "/work ok"]


def test_ordinary_file_and_process_calls_pass_the_profile(bare):
    # The allow-list must not break ordinary standard-library code.
    out = script(
        "import os, shutil, tempfile, time, threading, select, random, hashlib\n"
        "open('a.txt', 'w').write('x' * 1000)\n"
        "shutil.copy2('a.txt', 'b.txt'); shutil.copytree('.', '/tmp/tree'); os.chmod('b.txt', 0o600)\n"
        "os.utime('b.txt', (1, 2)); os.symlink('a.txt', 'c.txt'); os.rename('c.txt', 'd.txt')\n"
        "with tempfile.TemporaryDirectory() as d:\n    open(os.path.join(d, 'f'), 'w').write('y')\n"
        "t = threading.Thread(target=time.sleep, args=(0.01,)); t.start(); t.join()\n"
        "r, w = os.pipe(); os.write(w, b'z'); select.select([r], [], [], 1)\n"
        "print(os.stat('b.txt').st_mtime, oct(os.stat('b.txt').st_mode & 0o777), os.readlink('d.txt'),"
        " len(os.listdir('/tmp/tree')), os.times().user >= 0, len(random.SystemRandom().randbytes(8)),"
        " hashlib.sha256(b'').hexdigest()[:8], os.cpu_count() >= 1)\n",
        bare.replace(allowed_imports=bare.allowed_imports | {"shutil", "tempfile", "select"}),
    )
    assert out == "2.0 0o600 a.txt 2 True 8 e3b0c442 True\n"


def test_unprivileged_without_capabilities(bare):
    out = script(
        "import os\n"
        "print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print(status['CapEff'].strip(), status['CapBnd'].strip(), status['NoNewPrivs'].strip(), status['Seccomp'].strip())\n"
        "print(sorted(os.environ.items()))\n",
        bare,
    )
    ids, caps, environ = out.splitlines()
    assert ids == "65534 65534 65534 [65534]"
    assert caps == "0000000000000000 0000000000000000 1 2"
    assert environ == str(
        sorted(
            {
                "HOME": "/work",
                "HOSTNAME": "sandbox",
                "LANG": "C.UTF-8",
                # one BLAS/OpenMP thread: a library preloaded in a fork server holds none
                "MKL_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1",
                "PATH": "/usr/bin:/bin",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONHASHSEED": "0",
            }.items()
        )
    )


def test_pids_limit_contains_a_fork_bomb(bare):
    limits = bare.limits.to_dict() | {"max_procs": 12}
    out = script(
        "import os, time\n"
        "made = 0\n"
        "while True:\n"
        "    try:\n        pid = os.fork()\n    except OSError as e:\n        print(made, e.errno); break\n"
        "    if pid == 0:\n        time.sleep(60); os._exit(0)\n"
        "    made += 1\n",
        bare.replace(limits=Limits(**limits)),
    )
    made, errno = out.split()
    assert 0 < int(made) < 12 and errno == "11"  # EAGAIN from the pids cgroup


def test_pids_limit_contains_a_thread_bomb(bare):
    out = script(
        "import threading, time\n"
        "made = 0\n"
        "try:\n"
        "    while True:\n        threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); made += 1\n"
        "except RuntimeError as e:\n    print(made, e)\n",
        bare,
    )
    made, message = out.split(" ", 1)
    assert 0 < int(made) < bare.limits.max_procs and "thread" in message


def test_container_seccomp_denies_what_the_worker_filter_would_kill(bare):
    out = script(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, nr in (('ptrace', 101), ('mount', 165), ('unshare', 272), ('bpf', 321), ('io_uring_setup', 425)):\n"
        "    print(name, libc.syscall(nr, 0, 0, 0, 0), ctypes.get_errno())\n",
        bare,
    )
    assert out.split("\n")[:-1] == [
        f"{name} -1 1" for name in ("ptrace", "mount", "unshare", "bpf", "io_uring_setup")
    ]


def test_environments_do_not_share_a_container(engine, docker_config):
    source = make_env_source(reset="return open('/proc/self/cgroup').read()[-80:], {}")
    permissive = docker_config.replace(backend_options=NO_WORKER_LAYERS)
    with open_env(source, config=permissive) as a, open_env(source, config=permissive) as b:
        assert a.reset()[0] != b.reset()[0]  # each reads its own container's cgroup
        assert len(our_containers(engine)) == 2


# -- pool, doctor, configuration mistakes ---------------------------------------------
def test_pool_of_warm_containers(engine, docker_config):
    with SandboxPool(docker_config, size=2) as pool:
        assert pool.wait_ready(60)
        assert len(our_containers(engine)) == 2
        envs = [pool.open_env(GAME) for _ in range(3)]
        for seed, env in enumerate(envs):
            env.reset(seed=seed)
            assert env.step(env.call("solution"))[1] == 1.0
    assert our_containers(engine) == []


def test_doctor_reports_every_layer_active(docker_config):
    report = doctor_report(docker_config)
    assert "using 'docker'" in report and "8/8 layers active" in report, report


def test_missing_image_is_an_infrastructure_error_naming_the_build(docker_config):
    config = docker_config.replace(backend_options={"image": "spade-sandbox:no-such-tag"})
    with pytest.raises(InfrastructureError) as caught:
        open_env(GAME, config=config)
    assert caught.value.is_infrastructure and "build-image.sh" in caught.value.message


HOST_THAT_DIES = """
import sys
from spade_sandbox import Limits, SandboxConfig, open_env
from spade_sandbox.docker_backend import owner_label
source = "class HangEnv:\\n    def reset(self, seed=None):\\n        return 'r', {}\\n    def step(self, action):\\n        while True: pass\\n"
env = open_env(source, config=SandboxConfig(backend="docker", limits=Limits(call_wall_s=60.0, cpu_s=120)))
env.reset()
print(owner_label(), flush=True)
env.step("spin")
"""


def test_containers_of_a_host_that_died_are_removed(engine):
    from spade_sandbox.docker_backend import remove_leftover_containers

    child = subprocess.Popen(
        [sys.executable, "-c", HOST_THAT_DIES], stdout=subprocess.PIPE, text=True
    )
    try:
        owner = child.stdout.readline().strip()
        assert owner.endswith(f":{child.pid}")
        time.sleep(0.5)  # the step is running in the container now
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    orphans = worker_containers(engine, owner)
    assert (
        len(orphans) == 1 and orphans[0]["State"] == "running"
    )  # busy: stdin EOF alone does not stop it
    assert remove_leftover_containers() == 1
    assert worker_containers(engine, owner) == []


def test_environments_in_parallel_threads(engine, docker_config):
    # A trainer drives many environments at once: one engine client, a pump thread each.
    from concurrent.futures import ThreadPoolExecutor

    def episode(seed: int) -> tuple:
        with open_env(GAME, config=docker_config) as env:
            obs, _ = env.reset(seed=seed)
            answer = env.call("solution")
            return seed, answer, env.step(answer)[1:3]

    with ThreadPoolExecutor(4) as executor:
        results = sorted(executor.map(episode, range(6)))
    with open_env(GAME, config=docker_config.replace(backend="process")) as env:
        for seed, answer, outcome in results:
            env.reset(seed=seed)
            assert answer == env.call("solution") and outcome == (1.0, True)
    assert our_containers(engine) == []
