"""The red-team suite: environments written as an adversarial designer would write them.

Every case runs twice, with bubblewrap and without it (the process backend's two modes), on
workers forked by a pool's zygote, and asserts the typed outcome: the `ReasonCode` of the
`SandboxError` the host gets, or, for an attack the environment catches itself, that what it
got back reveals nothing. Faults of the sandbox (an outside kill, a dead fork server, a dead
opening thread) must come back as infrastructure. A case is contained when its test passes;
conftest's terminal summary prints `N cases, N contained`, and at the end the suite asserts that no process, file descriptor,
work directory or file of uid 65534 is left behind.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import spade_sandbox as ss
from conftest import GAME, OS_MODULES, descendants, make_env_source, open_fds
from spade_sandbox import ReasonCode as R
from spade_sandbox import process

pytestmark = pytest.mark.timeout(120)

HOST_SECRET = "redteam-host-secret-41d9"
HOST_FILE = os.path.join(tempfile.gettempdir(), "spade-redteam-host-file")
LIMITS = ss.Limits(
    call_wall_s=1.0, cpu_s=8, mem_mib=256, max_output_kib=64, max_steps=30,
    max_disk_mib=8, max_disk_files=200,
)  # fmt: skip
PERMISSIVE = ss.DEFAULT_ALLOWED_IMPORTS | OS_MODULES | {"mmap"}

# A step that reads or writes something it must not: "denied" when the sandbox refused it.
PROBE = """
try:
    {code}
except Exception as exc:
    return "denied " + type(exc).__name__, 0.0, True, False, {{}}
return "leaked " + repr(data)[:200], 0.0, True, False, {{}}
"""


def probe(code: str) -> str:
    return PROBE.format(code=code.strip().replace("\n", "\n    "))


def denied(obs: object) -> bool:
    return isinstance(obs, str) and obs.startswith("denied") and HOST_SECRET not in obs


HOSTILE_AFTER_3 = "self.n = getattr(self, 'n', 0) + 1\nif self.n > 3:\n    {code}\nreturn 'fine', 0.0, False, False, {{}}"


def after_3(code: str) -> str:
    return HOSTILE_AFTER_3.format(code=code.strip().replace("\n", "\n    "))


def frame(body: bytes) -> str:
    """A step writing a raw frame with `body` to every descriptor it can (the reply fd too)."""
    return (
        f"import os\nbody = {body!r}\n"
        "for fd in range(3, 40):\n"
        "    try:\n        os.write(fd, len(body).to_bytes(4, 'big') + body)\n"
        "    except OSError:\n        pass\n"
        "return 'sent', 0.0, False, False, {}"
    )


@dataclass(frozen=True)
class Case:
    source: str
    expect: R | Callable[[object], bool]
    steps: int = 1
    permissive: bool = False
    call: str | None = None


def S(**parts: str) -> str:  # noqa: N802 - reads as a constructor in the table
    return make_env_source(**parts)


CASES: dict[str, Case] = {
    # -- the import policy --------------------------------------------------------------
    "import_os_at_module_level": Case(S(header="import os"), R.FORBIDDEN_IMPORT),
    "import_subprocess_in_a_method": Case(S(step="import subprocess"), R.FORBIDDEN_IMPORT),
    "dunder_import_of_socket": Case(S(step='__import__("socket")'), R.FORBIDDEN_IMPORT),
    "import_through_builtins_dict": Case(S(step='__builtins__["__import__"]("ctypes")'), R.FORBIDDEN_IMPORT),
    "swallowed_forbidden_import": Case(S(step='try:\n    __import__("os")\nexcept Exception:\n    pass\nreturn "o", 0.0, True, False, {}'), R.FORBIDDEN_IMPORT),
    # -- bad return values --------------------------------------------------------------
    "nan_reward": Case(S(step='return "o", float("nan"), True, False, {}'), R.BAD_RETURN),
    "inf_reward": Case(S(step='return "o", float("inf"), True, False, {}'), R.BAD_RETURN),
    "bool_reward": Case(S(step='return "o", True, True, False, {}'), R.BAD_RETURN),
    "huge_int_reward": Case(S(step='return "o", 10 ** 400, True, False, {}'), R.BAD_RETURN),
    "step_is_a_generator": Case(S(step='yield "o", 0.0, True, False, {}'), R.BAD_RETURN),
    "generator_observation": Case(S(step='return (c for c in "o"), 0.0, True, False, {}'), R.BAD_RETURN),
    "str_subclass_observation": Case(S(step='class T(str):\n    pass\nreturn T("o"), 0.0, True, False, {}'), R.BAD_RETURN),
    "set_in_info": Case(S(step='return "o", 0.0, True, False, {"s": {1, 2}}'), R.BAD_RETURN),
    "info_nested_200_deep": Case(S(step='d = []\nfor _ in range(200):\n    d = [d]\nreturn "o", 0.0, True, False, {"d": d}'), R.BAD_RETURN),
    "lone_surrogate_observation": Case(S(step='return "\\ud800", 0.0, True, False, {}'), R.BAD_RETURN),
    "reset_returns_a_string": Case(S(reset='return "just text"'), R.BAD_RETURN),
    # -- output floods ------------------------------------------------------------------
    "huge_observation": Case(S(step='return "x" * 1_000_000, 0.0, True, False, {}'), R.OUTPUT_TOO_LARGE),
    "huge_info": Case(S(step='return "o", 0.0, True, False, {"x": "y" * 1_000_000}'), R.OUTPUT_TOO_LARGE),
    "print_flood": Case(S(step='while True:\n    print("x" * 1000)'), R.OUTPUT_TOO_LARGE),
    "print_flood_caught": Case(S(step='try:\n    while True:\n        print("x" * 1000)\nexcept Exception:\n    pass\nreturn "o", 0.0, True, False, {}'), R.OUTPUT_TOO_LARGE),
    # -- exits and exceptions -----------------------------------------------------------
    "system_exit_in_step": Case(S(step="raise SystemExit(3)"), R.CRASHED),
    "keyboard_interrupt_in_step": Case(S(step="raise KeyboardInterrupt"), R.ENV_EXCEPTION),
    "generator_exit_in_step": Case(S(step="raise GeneratorExit"), R.ENV_EXCEPTION),
    "exception_whose_str_raises": Case(S(step='class E(Exception):\n    def __str__(self):\n        raise ValueError("no")\nraise E()'), R.ENV_EXCEPTION),
    "exception_in_constructor": Case(S(init="raise RuntimeError('no')"), R.ENV_EXCEPTION),
    "deep_recursion": Case(S(step="def f(n):\n    return f(n + 1)\nreturn f(0)"), R.ENV_EXCEPTION),
    "os_exit_in_step": Case(S(step="import os\nos._exit(0)"), R.CRASHED, permissive=True),
    "stack_overflow_past_the_recursion_limit": Case(S(step="import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return list(map(f, [n + 1]))\nreturn f(0)"), R.CRASHED, permissive=True),
    "abort": Case(S(step="import os\nos.abort()"), R.CRASHED, permissive=True),
    "sigterm_to_itself": Case(S(step="import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\nreturn 'o', 0.0, True, False, {}"), R.CRASHED, permissive=True),
    "null_pointer_through_ctypes": Case(S(step="import ctypes\nctypes.string_at(0)"), R.CRASHED, permissive=True),
    # -- time ---------------------------------------------------------------------------
    "sleep_in_reset": Case(S(header="import time", reset="time.sleep(30)"), R.TIMEOUT),
    "sleep_in_step": Case(S(header="import time", step="time.sleep(30)"), R.TIMEOUT),
    "sleep_in_constructor": Case(S(header="import time", init="time.sleep(30)"), R.TIMEOUT),
    "sleep_at_module_level": Case(S(header="import time\n_ = time.sleep(30)"), R.TIMEOUT),
    "sleep_in_solution": Case(S(header="import time", extra="\ndef solution(self):\n    time.sleep(30)\n"), R.TIMEOUT, call="solution"),
    "busy_loop_in_step": Case(S(step="while True:\n    pass"), R.TIMEOUT),
    "catastrophic_regex": Case(S(header="import re", step='re.match(r"(a+)+$", "a" * 40 + "b")'), R.TIMEOUT),
    # -- sleepers that turn hostile after three steps -----------------------------------
    "sleeper_then_busy_loop": Case(S(step=after_3("while True:\n    pass")), R.TIMEOUT, steps=6),
    "sleeper_then_import": Case(S(step=after_3('__import__("os")')), R.FORBIDDEN_IMPORT, steps=6),
    "sleeper_then_flood": Case(S(step=after_3('return "x" * 1_000_000, 0.0, False, False, {}')), R.OUTPUT_TOO_LARGE, steps=6),
    "sleeper_then_fork": Case(S(step=after_3("import os\nos.fork()")), R.FORBIDDEN_SYSCALL, steps=6, permissive=True),
    "slow_memory_growth": Case(S(step='self.hog = getattr(self, "hog", [])\nself.hog.append(bytearray(24 << 20))\nreturn "o", 0.0, False, False, {}'), R.MEMORY, steps=20),
    "memory_bomb": Case(S(step='x = "x" * (1 << 31)'), R.MEMORY),
    "episode_longer_than_max_steps": Case(S(), R.LIMIT_EXCEEDED, steps=40),
    # -- disk ---------------------------------------------------------------------------
    "many_small_files": Case(S(step='for i in range(5000):\n    open(f"f{i}", "w").close()'), R.DISK_QUOTA),
    "many_big_files": Case(S(step='block = "x" * (1 << 20)\nfor i in range(100):\n    with open(f"b{i}", "w") as f:\n        f.write(block * 4)'), R.DISK_QUOTA),
    "deep_directory_tree": Case(S(step='import os\nfor i in range(400):\n    os.mkdir("d")\n    os.chdir("d")'), R.DISK_QUOTA, permissive=True),
    "files_spread_over_steps": Case(S(step='self.k = getattr(self, "k", 0) + 1\nfor i in range(40):\n    open(f"s{self.k}_{i}", "w").close()\nreturn "o", 0.0, False, False, {}'), R.DISK_QUOTA, steps=10),
    # -- the OS -------------------------------------------------------------------------
    "fork_bomb": Case(S(step="import os\nwhile True:\n    os.fork()"), R.FORBIDDEN_SYSCALL, permissive=True),
    "os_system": Case(S(step='import os\nos.system("id")'), R.FORBIDDEN_SYSCALL, permissive=True),
    "subprocess_run": Case(S(step='import subprocess\nsubprocess.run(["true"])'), R.FORBIDDEN_SYSCALL, permissive=True),
    "socket_to_localhost": Case(S(step='import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 22))'), R.FORBIDDEN_SYSCALL, permissive=True),
    "kill_the_parent": Case(S(step="import os\nos.kill(os.getppid(), 9)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "signal_pid_1": Case(S(step="import os\nos.kill(1, 15)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "sigkill_to_itself": Case(S(step="import os\nos.kill(os.getpid(), 9)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "raise_sigkill": Case(S(step="import signal\nsignal.raise_signal(signal.SIGKILL)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "setuid_root": Case(S(step="import os\nos.setuid(0)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "ptrace_through_ctypes": Case(S(step="import ctypes\nctypes.CDLL(None).ptrace(0, 0, 0, 0)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "mount_through_ctypes": Case(S(step='import ctypes\nctypes.CDLL(None).mount(b"none", b"/work", b"tmpfs", 0, None)'), R.FORBIDDEN_SYSCALL, permissive=True),
    "unshare_through_ctypes": Case(S(step="import ctypes\nctypes.CDLL(None).unshare(0x10000000)"), R.FORBIDDEN_SYSCALL, permissive=True),
    "system_through_ctypes": Case(S(step='import ctypes\nctypes.CDLL(None).system(b"id")'), R.FORBIDDEN_SYSCALL, permissive=True),
    "mmap_beyond_the_memory_limit": Case(S(step="import mmap\nm = mmap.mmap(-1, 1 << 33)"), R.ENV_EXCEPTION, permissive=True),
    "thread_bomb": Case(S(step=probe("import threading, time\nfor _ in range(10000):\n    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ndata = 'started all'")), denied, permissive=True),
    # -- the protocol -------------------------------------------------------------------
    "close_the_protocol_fds": Case(S(step="import os\nfor fd in range(3, 40):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\nreturn 'o', 0.0, True, False, {}"), R.PROTOCOL_ERROR, permissive=True),
    "forged_reply_frame": Case(S(step=frame(b'{"id":2,"ok":true,"value":["won",1.0,true,false,{}]}')), R.PROTOCOL_ERROR, permissive=True),
    "reply_nested_30000_deep": Case(S(step=frame(b'{"id":2,"ok":true,"value":' + b"[" * 30_000 + b"]" * 30_000 + b"}")), R.PROTOCOL_ERROR, permissive=True),
    "garbage_frame": Case(S(step=frame(b"\xff\xfe not json")), R.PROTOCOL_ERROR, permissive=True),
    "forged_infrastructure_reason": Case(S(step=frame(b'{"id":2,"ok":false,"reason":"infrastructure","message":"not me"}')), R.PROTOCOL_ERROR, permissive=True),
    # -- files and secrets (the environment catches the refusal itself) -----------------
    "write_a_host_file": Case(S(step=probe(f"open({HOST_FILE!r}, 'w').write('x')\ndata = 'written'")), denied),
    "read_etc_shadow": Case(S(step=probe("data = open('/etc/shadow').read()")), denied),
    "read_proc_self_environ": Case(S(step=probe("data = open('/proc/self/environ').read()")), denied),
    "read_the_host_checkout": Case(S(step=probe(f"data = open({__file__!r}).read()")), denied),
    "symlink_to_etc_passwd": Case(S(step=probe("import os\nos.symlink('/etc/passwd', 'p')\ndata = open('p').read()")), denied, permissive=True),
    "hardlink_to_etc_passwd": Case(S(step=probe("import os\nos.link('/etc/passwd', 'h')\ndata = open('h').read()")), denied, permissive=True),
    "chdir_to_root_and_read": Case(S(step=probe("import os\nos.chdir('/')\ndata = open('etc/passwd').read()")), denied, permissive=True),
    "host_environment_variables": Case(S(step=probe("import os\ndata = dict(os.environ)\nif 'SPADE_REDTEAM_SECRET' not in data:\n    raise LookupError")), denied, permissive=True),
    "expanduser_stays_in_the_work_dir": Case(S(step='import os\nreturn os.path.expanduser("~/x"), 0.0, True, False, {}'), lambda obs: isinstance(obs, str) and obs.endswith("/x") and not obs.startswith("/root"), permissive=True),
}  # fmt: skip


# -- modes: with and without bubblewrap --------------------------------------------------


class Mode:
    def __init__(self, name: str, work_root: str) -> None:
        self.name = name
        base = ss.SandboxConfig(limits=LIMITS, work_root=work_root)
        self.configs = {False: base, True: base.replace(allowed_imports=PERMISSIVE)}
        self.pools = {k: ss.SandboxPool(c, size=1) for k, c in self.configs.items()}

    def open(self, source: str, permissive: bool = False) -> ss.SandboxedEnv:
        return self.pools[permissive].open_env(source)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()


@pytest.fixture(scope="module")
def suite_root():
    """One work root for the whole suite, so what is left behind can be found; and the
    host's accounting before and after."""
    if os.path.exists(HOST_FILE):
        os.unlink(HOST_FILE)
    fds = open_fds()
    root = tempfile.mkdtemp(prefix="spade-redteam-")
    os.environ["SPADE_REDTEAM_SECRET"] = HOST_SECRET
    yield root
    os.environ.pop("SPADE_REDTEAM_SECRET", None)
    deadline = time.monotonic() + 10
    while descendants() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {pid: open(f"/proc/{pid}/cmdline").read().replace("\0", " ") for pid in descendants()}
    assert left == {}, "processes were left behind"
    assert open_fds() <= fds, "file descriptors were left open"
    leftovers = [os.path.join(d, f) for d, dirs, files in os.walk(root) for f in dirs + files]
    assert leftovers == [], "work directories or files were left behind"
    nobody = [p for p in [root, *leftovers] if os.lstat(p).st_uid == process.NOBODY]
    assert nobody == [], "files of uid 65534 were left behind"
    assert not os.path.exists(HOST_FILE), "an environment wrote a host file"
    os.rmdir(root)


@pytest.fixture(scope="module", params=["bwrap", "no_bwrap"])
def mode(request, suite_root):
    saved = process.bwrap_status
    if request.param == "no_bwrap":
        process.bwrap_status = lambda: (None, "unavailable: disabled by the red-team suite")
    elif saved()[0] is None:
        pytest.skip("bubblewrap is not installed here")
    m = Mode(request.param, suite_root)
    try:
        yield m
    finally:
        m.close()
        process.bwrap_status = saved


def play(mode: Mode, case: Case) -> object:
    """The observation the case ended on, or the SandboxError it raised."""
    try:
        env = mode.open(case.source, case.permissive)
    except ss.SandboxError as exc:
        return exc
    try:
        obs, _ = env.reset(seed=0)
        if case.call:
            return env.call(case.call)
        for _ in range(case.steps):
            obs, *_ = env.step("a")
        return obs
    except ss.SandboxError as exc:
        return exc
    finally:
        env.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(mode, name):
    case = CASES[name]
    got = play(mode, case)
    if isinstance(case.expect, R):
        assert isinstance(got, ss.SandboxError), (
            f"{name}: expected {case.expect.value}, got {got!r}"
        )
        assert got.reason is case.expect, f"{name}: {got}"
        assert not got.is_infrastructure
        assert HOST_SECRET not in str(got)
    else:
        assert not isinstance(got, ss.SandboxError), f"{name}: {got}"
        assert case.expect(got), f"{name}: {got!r}"


# -- cases with more than one environment or a fault from outside ------------------------


def test_pooled_environments_cannot_read_each_others_output(mode):
    writer = S(
        reset='import os\nos.write(1, b"MARK-1")\nos.write(2, b"MARK-2")\nprint("MARK-3")\nreturn "w", {}'
    )
    reader = S(reset='import os\nout = ""\nfor fd in (0, 1, 2):\n    try:\n        out += os.pread(fd, 4096, 0).decode("latin-1")\n    except OSError as exc:\n        out += type(exc).__name__\nreturn out or "nothing", {}')  # fmt: skip
    first = mode.open(writer, permissive=True)
    first.reset()
    second = mode.open(reader, permissive=True)
    seen_during, _ = second.reset()
    first.close()
    third = mode.open(reader, permissive=True)
    seen_after, _ = third.reset()
    second.close()
    third.close()
    assert "MARK" not in seen_during and "MARK" not in seen_after


def host_pid_of(env: ss.SandboxedEnv) -> int:
    """The host pid of a pooled environment's worker (the zygote reports its namespace pid)."""
    worker = env._worker
    below, todo = set(), [worker.zygote.proc.pid]
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(
                    int(entry)
                )
        except (OSError, ValueError, IndexError):
            continue
    while todo:
        for child in children.get(todo.pop(), []):
            below.add(child)
            todo.append(child)
    for pid in below:
        with open(f"/proc/{pid}/status") as f:
            nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        if int(nspid[-1]) == worker.pid:
            return pid
    raise LookupError("the worker process was not found")


def test_a_kill_from_outside_is_infrastructure(mode):
    slow = S(header="import time", step='open("started", "w").close()\ntime.sleep(0.8)\nreturn "o", 0.0, True, False, {}')  # fmt: skip
    env = mode.open(slow)
    env.reset()
    work_dir, pid = env.work_dir, host_pid_of(env)

    def kill_when_started() -> None:
        while not os.path.exists(os.path.join(work_dir, "started")):
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    with pytest.raises(ss.SandboxError) as info:
        env.step("a")
    killer.join()
    env.close()
    assert info.value.is_infrastructure, str(info.value)


def test_a_dead_fork_server_is_infrastructure_and_the_pool_recovers(mode):
    pool = ss.SandboxPool(mode.configs[False], size=1)
    try:
        assert pool.wait_ready(30)
        env = pool.open_env(GAME)
        env.reset(seed=1)
        zygote = pool._zygote
        os.killpg(zygote.proc.pid, signal.SIGKILL)
        while zygote.alive:
            time.sleep(0.005)
        with pytest.raises(ss.SandboxError) as info:
            env.step("\\boxed{5}")
        assert info.value.is_infrastructure, str(info.value)
        assert env.reset(seed=1)[0].startswith("Guess a number")  # on a fresh worker
        other = pool.open_env(GAME)  # the pool restarted its fork server
        assert other.reset(seed=2)[0].startswith("Guess a number")
        other.close()
        env.close()
    finally:
        pool.close()


def test_a_worker_outlives_the_thread_that_opened_it(mode):
    opened: list[ss.SandboxedEnv] = []
    opener = threading.Thread(target=lambda: opened.append(ss.open_env(GAME, config=mode.configs[False])))  # fmt: skip
    opener.start()
    opener.join()
    env = opened[0]
    time.sleep(0.2)  # room for a parent-death signal to arrive, were there one
    try:
        assert env.reset(seed=1)[0].startswith("Guess a number")
        assert env.step("\\boxed{1}")[0]
    finally:
        env.close()
