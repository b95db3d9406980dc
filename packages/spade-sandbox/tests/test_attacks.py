"""The attack-and-fault suite: hostile or broken environments, each answered by the right
reason code while the host (this process), its files and a bystander environment are
untouched; afterwards no child process is left and the fd count is back at its baseline.

Cases under the default import policy check the policy; the `permissive` ones open the
policy up to show the OS layers (seccomp, Landlock, namespaces, rlimits) hold on their own.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time

import pytest
from conftest import GAME, descendants, make_env_source, open_fds
from spade_sandbox import ReasonCode, SandboxError, SandboxPool, open_env

pytestmark = pytest.mark.timeout(60)

R = ReasonCode
HOST_SECRET = "host-secret-7f3a9c"
OPEN = open_env  # set per run by the `opener` fixture


@pytest.fixture(scope="module", autouse=True)
def no_leftovers():
    fds_before = open_fds()
    yield
    deadline = time.monotonic() + 5
    while descendants() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {pid: open(f"/proc/{pid}/cmdline").read().replace("\0", " ") for pid in descendants()}
    assert left == {}, "sandbox processes were left behind"
    assert open_fds() <= fds_before, "file descriptors leaked"


@pytest.fixture(scope="module", params=["direct", "pooled"])
def opener(request, no_leftovers, config, permissive):
    """Run every case on a directly started worker and on one forked by a pool's zygote."""
    global OPEN
    if request.param == "direct":
        OPEN = open_env
        yield None
    else:
        pools = {c: SandboxPool(c, size=1) for c in (config, permissive)}
        for pool in pools.values():
            assert pool.wait_ready(60)

        def pooled_open(source, config):
            # Configs made inside a test (other limits) have no pool: those open directly.
            return (
                pools[config].open_env(source)
                if config in pools
                else open_env(source, config=config)
            )

        OPEN = pooled_open
        yield pools
        for pool in pools.values():
            pool.close()
    OPEN = open_env


@pytest.fixture(scope="module")
def bystander(config, opener):
    """An environment that must keep working while the attacks run next to it."""
    env = open_env(GAME, config=config)
    yield env
    env.close()


@pytest.fixture(autouse=True)
def host_unaffected(bystander, opener):
    before = descendants()
    os.environ["SPADE_TEST_SECRET"] = HOST_SECRET
    yield
    os.environ.pop("SPADE_TEST_SECRET", None)
    obs, info = bystander.reset(seed=3)
    assert obs.startswith("Guess a number") and info == {"n": 10}
    answer = bystander.call("solution")
    assert bystander.step(answer)[1:3] == (1.0, True)
    for pool in (opener or {}).values():
        assert pool.wait_ready(60)
    # A pool replaces the spare a test used: the same number of processes, not the same ones.
    assert len(descendants()) == len(before), "an attack left a process behind"


def expect(reason, source, config, *, op="step", action="go"):
    """Open `source`, drive it to `op`, and assert the call fails with `reason`."""
    started = time.monotonic()
    with pytest.raises(SandboxError) as caught:
        with OPEN(source, config=config) as env:
            if op in ("reset", "step"):
                env.reset(seed=0)
            if op == "step":
                env.step(action)
            if op == "call":
                env.call("probe")
    err = caught.value
    assert err.reason is reason, f"expected {reason.value}, got {err.reason.value}: {err.message}"
    assert not err.is_infrastructure
    assert time.monotonic() - started < config.limits.call_wall_s * 3 + 5
    return err


def run_step(source, config):
    """A step that is expected to succeed; returns its observation."""
    with OPEN(source, config=config) as env:
        env.reset(seed=0)
        return env.step("go")[0]


# -- deadlines -------------------------------------------------------------------------
def test_infinite_loop_in_reset(config):
    expect(R.TIMEOUT, make_env_source(reset="while True: pass"), config, op="reset")


def test_infinite_loop_in_step(config):
    err = expect(R.TIMEOUT, make_env_source(step="while True: pass"), config)
    assert "call_wall_s" in err.message


def test_c_level_loop_is_killed_on_time(config):
    started = time.monotonic()
    expect(
        R.TIMEOUT,
        make_env_source(step="return str(sum(range(10**13))), 0.0, False, False, {}"),
        config,
    )
    assert time.monotonic() - started < config.limits.call_wall_s + 2


def test_catastrophic_regex_backtracking(config):
    src = make_env_source(
        header="import re",
        step='re.match(r"(a+)+$", "a" * 64 + "b"); return "x", 0.0, False, False, {}',
    )
    expect(R.TIMEOUT, src, config)


def test_sleeping_past_the_deadline(config):
    expect(R.TIMEOUT, make_env_source(header="import time", step="time.sleep(60)"), config)


def test_infinite_loop_in_constructor(config):
    expect(R.TIMEOUT, make_env_source(init="while True: pass"), config, op="open")


def test_infinite_loop_at_module_level(config):
    expect(R.TIMEOUT, "while True:\n    pass\n" + make_env_source(), config, op="open")


def test_cpu_time_limit_kills_a_busy_worker(config):
    tight = config.replace(
        limits=config.limits.__class__(
            **{**config.limits.to_dict(), "cpu_s": 1, "call_wall_s": 8.0}
        )
    )
    expect(R.TIMEOUT, make_env_source(step="while True: pass"), tight)


def test_ignoring_sigterm_does_not_delay_the_kill(permissive):
    src = make_env_source(
        header="import signal",
        step="signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass",
    )
    expect(R.TIMEOUT, src, permissive)


def test_close_is_quick_when_close_hangs_and_sigterm_is_ignored(permissive):
    src = make_env_source(header="import signal", init="signal.signal(signal.SIGTERM, signal.SIG_IGN)",
                          extra="def close(self):\n    while True: pass\n")  # fmt: skip
    env = OPEN(src, config=permissive)
    env.reset()
    started = time.monotonic()
    env.close()
    assert time.monotonic() - started < 3
    env.close()  # idempotent


# -- memory, recursion, processes, threads ---------------------------------------------
def test_memory_bomb_one_allocation(config):
    expect(R.MEMORY, make_env_source(step="x = bytearray(10**10)"), config)


def test_memory_bomb_gradual(config):
    expect(R.MEMORY, make_env_source(step="x = []\nwhile True: x.append(bytearray(10**7))"), config)


def test_deep_recursion_is_the_environments_exception(config):
    src = make_env_source(step="return self.step(action)")
    err = expect(R.ENV_EXCEPTION, src, config)
    assert "RecursionError" in err.message


def test_stack_overflow_past_the_recursion_limit_crashes_only_the_worker(permissive):
    slow = permissive.replace(
        limits=permissive.limits.__class__(**{**permissive.limits.to_dict(), "call_wall_s": 10.0})
    )
    src = make_env_source(
        header="import sys",
        step="sys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6): x = [x]\nrepr(x)",
    )
    expect(R.CRASHED, src, slow)


def test_fork_bomb_refused_by_import_policy(config):
    expect(
        R.FORBIDDEN_IMPORT,
        make_env_source(header="import os", step="while True: os.fork()"),
        config,
    )


def test_fork_bomb_killed_by_seccomp(permissive):
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import os", step="while True: os.fork()"),
        permissive,
    )


def test_thread_bomb_is_capped(permissive):
    src = make_env_source(header="import threading, time",
                          step="while True: threading.Thread(target=time.sleep, args=(30,), daemon=True).start()")  # fmt: skip
    err = expect(R.ENV_EXCEPTION, src, permissive)
    assert "thread" in err.message


def test_environment_cannot_leave_processes_behind(permissive):
    src = make_env_source(
        header="import os", step="if os.fork() == 0:\n    import time\n    time.sleep(60)"
    )
    expect(R.FORBIDDEN_SYSCALL, src, permissive)


def test_threads_left_running_die_with_the_worker(permissive):
    # RLIMIT_NPROC counts every task of the worker's uid on the machine: run as root, every
    # worker is uid 65534, so other sandboxes' workers count against max_procs. A loaded
    # machine left no room for this thread; the test is about its end, not the limit.
    roomy = permissive.replace(limits=dataclasses.replace(permissive.limits, max_procs=4096))
    src = make_env_source(header="import threading",
                          step="threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\n"
                               "return 'spun', 0.0, False, False, {}")  # fmt: skip
    assert run_step(src, roomy) == "spun"  # children are checked by the autouse fixture


# -- the OS: processes, network, files, environment ------------------------------------
def test_os_system_refused_by_import_policy(config):
    expect(
        R.FORBIDDEN_IMPORT, make_env_source(header="import os", step="os.system('true')"), config
    )


def test_os_system_through_an_allowed_module_is_killed_by_seccomp(config):
    # `random` keeps a reference to `os`: the import policy alone is not a boundary.
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import random", step="random._os.system('id')"),
        config,
    )


def test_subprocess_killed_by_seccomp(permissive):
    src = make_env_source(header="import subprocess", step="subprocess.run(['/bin/true'])")
    expect(R.FORBIDDEN_SYSCALL, src, permissive)


def test_socket_refused_by_import_policy(config):
    expect(
        R.FORBIDDEN_IMPORT, make_env_source(header="import socket", step="socket.socket()"), config
    )


def test_socket_to_localhost_killed_and_never_connects(permissive):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    src = make_env_source(
        header="import socket", step=f"socket.create_connection(('127.0.0.1', {port}))"
    )
    try:
        expect(R.FORBIDDEN_SYSCALL, src, permissive)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_writing_outside_the_work_dir_is_denied(config, tmp_path):
    target = tmp_path / "planted.txt"
    src = make_env_source(step=f"open({str(target)!r}, 'w').write('x')")
    err = expect(R.ENV_EXCEPTION, src, config)
    assert "Error" in err.message
    assert not target.exists()


def test_writing_the_sandbox_tmp_is_denied(config):
    err = expect(
        R.ENV_EXCEPTION, make_env_source(step="open('/tmp/planted', 'w').write('x')"), config
    )
    assert "PermissionError" in err.message or "OSError" in err.message
    assert not os.path.exists("/tmp/planted")


def test_writing_inside_the_work_dir_works(config):
    src = make_env_source(
        step="open('scratch.txt', 'w').write('ok')\nreturn open('scratch.txt').read(), 0.0, False, False, {}"
    )
    assert run_step(src, config) == "ok"


def test_writing_a_file_past_the_size_limit_fails(config):
    src = make_env_source(step="f = open('big', 'wb')\nfor _ in range(64): f.write(b'x' * 2**20)")
    err = expect(R.ENV_EXCEPTION, src, config)
    assert "File too large" in err.message or "27" in err.message


def test_reading_host_files(config):
    err = expect(
        R.ENV_EXCEPTION,
        make_env_source(step="return open('/etc/passwd').read(), 0.0, False, False, {}"),
        config,
    )
    assert "root:" not in err.message


def test_reading_the_host_checkout(config):
    src = make_env_source(
        step=f"return open({os.path.abspath(__file__)!r}).read(), 0.0, False, False, {{}}"
    )
    expect(R.ENV_EXCEPTION, src, config)


def test_host_environment_variables_are_not_visible(config):
    src = make_env_source(
        header="import random", step="return repr(dict(random._os.environ)), 0.0, False, False, {}"
    )
    seen = run_step(src, config)
    assert HOST_SECRET not in seen and "SPADE_TEST_SECRET" not in seen
    assert "PATH" in seen


def test_proc_of_the_host_is_not_visible(config):
    src = make_env_source(
        step=f"return open('/proc/{os.getpid()}/environ').read(), 0.0, False, False, {{}}"
    )
    err = expect(R.ENV_EXCEPTION, src, config)
    assert HOST_SECRET not in err.message


def test_ctypes_refused_by_import_policy(config):
    expect(
        R.FORBIDDEN_IMPORT,
        make_env_source(header="import ctypes", step="ctypes.CDLL(None)"),
        config,
    )


def test_ctypes_system_killed_by_seccomp(permissive):
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import ctypes", step="ctypes.CDLL(None).system(b'id')"),
        permissive,
    )


def test_ctypes_mount_syscall_killed(permissive):
    src = make_env_source(
        header="import ctypes",
        step="ctypes.CDLL(None).syscall(165, b'none', b'/work', b'tmpfs', 0, 0)",
    )
    expect(R.FORBIDDEN_SYSCALL, src, permissive)


def test_ctypes_null_pointer_crashes_only_the_worker(permissive):
    expect(
        R.CRASHED, make_env_source(header="import ctypes", step="ctypes.string_at(0)"), permissive
    )


def test_killing_the_parent(permissive):
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import os", step="os.kill(os.getppid(), 9)"),
        permissive,
    )


def test_killing_the_host_by_pid(permissive):
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import os", step=f"os.kill({os.getpid()}, 9)"),
        permissive,
    )


def test_ptrace_killed(permissive):
    src = make_env_source(header="import ctypes", step="ctypes.CDLL(None).ptrace(16, 1, 0, 0)")
    expect(R.FORBIDDEN_SYSCALL, src, permissive)


# -- the protocol channel --------------------------------------------------------------
PROTOCOL_FDS = "[fd for fd in range(3, 12) if fd not in (0, 1, 2)]"


def test_closing_the_protocol_pipe(permissive):
    src = make_env_source(header="import os, stat",
                          step=f"[os.close(fd) for fd in {PROTOCOL_FDS} if _is_pipe(fd)]\nreturn 'x', 0.0, False, False, {{}}")  # fmt: skip
    src += "\n\ndef _is_pipe(fd):\n    try:\n        return stat.S_ISFIFO(os.fstat(fd).st_mode)\n    except OSError:\n        return False\n"
    expect(R.PROTOCOL_ERROR, src, permissive)


def test_writing_garbage_to_the_protocol_pipe(permissive):
    src = make_env_source(
        header="import os",
        step=f"[_write(fd) for fd in {PROTOCOL_FDS}]\nreturn 'x', 0.0, False, False, {{}}",
    )
    src += "\n\ndef _write(fd):\n    try:\n        os.write(fd, b'garbage that is not a frame')\n    except OSError:\n        pass\n"
    expect(R.PROTOCOL_ERROR, src, permissive)


def test_forged_reply_frame_is_detected(permissive):
    src = make_env_source(
        header="import os, json",
        step=f"[_forge(fd) for fd in {PROTOCOL_FDS}]\nreturn 'x', 0.0, False, False, {{}}",
    )
    src += ("\n\ndef _forge(fd):\n    body = json.dumps({'id': 999, 'ok': True, 'value': ['forged', 1.0, True, False, {}]}).encode()\n"
            "    try:\n        os.write(fd, len(body).to_bytes(4, 'big') + body)\n    except OSError:\n        pass\n")  # fmt: skip
    expect(R.PROTOCOL_ERROR, src, permissive)


def test_sys_exit_mid_step(config):
    err = expect(R.CRASHED, make_env_source(step="raise SystemExit(3)"), config)
    assert "SystemExit(3)" in err.message


def test_os_exit_mid_step(config):
    expect(R.CRASHED, make_env_source(header="import random", step="random._os._exit(0)"), config)


# -- the import policy and the interpreter ---------------------------------------------
def test_dunder_import_is_guarded(config):
    expect(R.FORBIDDEN_IMPORT, make_env_source(step="__import__('os').system('id')"), config)


def test_importlib_refused(config):
    expect(
        R.FORBIDDEN_IMPORT,
        make_env_source(header="import importlib", step="importlib.import_module('os')"),
        config,
        op="open",
    )


def test_import_inside_a_method_is_found_before_running(config):
    expect(R.FORBIDDEN_IMPORT, make_env_source(step="import subprocess"), config, op="open")


def test_swallowed_forbidden_import_is_still_reported(config):
    src = make_env_source(
        step="try:\n    __import__('socket')\nexcept ImportError:\n    pass\nreturn 'x', 0.0, False, False, {}"
    )
    expect(R.FORBIDDEN_IMPORT, src, config)


def test_builtins_import_escape_is_still_killed(config):
    # Reaching the real importer through object.__subclasses__ defeats the import policy;
    # seccomp still stops what the module could do.
    step = ("imp = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'BuiltinImporter'][0]\n"
            "posix = imp.load_module('posix')\nposix.system('id')")  # fmt: skip
    expect(R.FORBIDDEN_SYSCALL, make_env_source(step=step), config)


def test_builtins_tampering_stays_inside_the_environment(config):
    src = make_env_source(step="__builtins__['len'] = lambda x: -1\n__builtins__['isinstance'] = lambda *a: True\n"
                               "return 'tampered', 0.0, False, False, {}")  # fmt: skip
    with OPEN(src, config=config) as env:
        env.reset()
        assert env.step("a")[0] == "tampered"
        assert env.step("b")[0] == "tampered"  # the worker's own checks still work
        assert env.reset() == ("start", {})


def test_pickle_refused(config):
    expect(
        R.FORBIDDEN_IMPORT,
        make_env_source(header="import pickle", step="pickle.loads(b'')"),
        config,
        op="open",
    )


def test_pickle_payload_killed_by_seccomp(permissive):
    payload = b"cposix\nsystem\n(S'id'\ntR."
    expect(
        R.FORBIDDEN_SYSCALL,
        make_env_source(header="import pickle", step=f"pickle.loads({payload!r})"),
        permissive,
    )


def test_marshal_refused(config):
    expect(
        R.FORBIDDEN_IMPORT,
        make_env_source(header="import marshal", step="marshal.loads(b'')"),
        config,
        op="open",
    )


def test_pickle_bytes_in_an_observation_stay_text(config):
    src = make_env_source(step="return \"cposix\\nsystem\\n(S'id'\\ntR.\", 0.0, False, False, {}")
    assert run_step(src, config).startswith("cposix")


# -- output and return values ----------------------------------------------------------
def test_stdout_flooding(config):
    err = expect(
        R.OUTPUT_TOO_LARGE, make_env_source(step="for _ in range(10**6): print('x' * 100)"), config
    )
    assert "printed" in err.message


def test_raw_fd_flooding_goes_nowhere(config):
    src = make_env_source(
        header="import random",
        step="for _ in range(2000): random._os.write(1, b'x' * 65536)\nreturn 'done', 0.0, False, False, {}",
    )
    assert run_step(src, config) == "done"


def test_huge_observation(config):
    expect(
        R.OUTPUT_TOO_LARGE,
        make_env_source(step="return 'x' * 10**7, 0.0, False, False, {}"),
        config,
    )


def test_huge_info(config):
    expect(
        R.OUTPUT_TOO_LARGE,
        make_env_source(step="return 'x', 0.0, False, False, {'blob': 'y' * 10**7}"),
        config,
    )


def test_huge_reset_observation(config):
    expect(R.OUTPUT_TOO_LARGE, make_env_source(reset="return 'x' * 10**7, {}"), config, op="reset")


@pytest.mark.parametrize(
    "returned, needle",
    [
        ("'x', float('nan'), False, False, {}", "finite"),
        ("'x', float('inf'), False, False, {}", "finite"),
        ("'x', '1.0', False, False, {}", "number"),
        ("'x', None, False, False, {}", "number"),
        ("'x', 10**400, False, False, {}", "too large"),
        ("'x', 0.0, False, {}", "length 4"),
        ("'x', 0.0, False, False, {}, 'extra'", "length 6"),
        ("'x', 0.0, 1, False, {}", "terminated must be a bool"),
        ("42, 0.0, False, False, {}", "observation must be a str"),
        ("'x', 0.0, False, False, ['not', 'a', 'dict']", "info must be a dict"),
        ("'x', 0.0, False, False, {'s': {1, 2}}", "not JSON"),
        ("'x', 0.0, False, False, {'v': float('nan')}", "not JSON"),
    ],
    ids=[
        "nan",
        "inf",
        "str-reward",
        "none-reward",
        "huge-int",
        "4-tuple",
        "6-tuple",
        "int-flag",
        "int-obs",
        "list-info",
        "set-in-info",
        "nan-in-info",
    ],  # fmt: skip
)
def test_bad_step_returns(config, returned, needle):
    err = expect(R.BAD_RETURN, make_env_source(step=f"return {returned}"), config)
    assert needle in err.message


def test_bad_reset_return(config):
    err = expect(
        R.BAD_RETURN, make_env_source(reset="return 'only an observation'"), config, op="reset"
    )
    assert "(observation, info)" in err.message


def test_bad_return_keeps_the_environment_usable(config):
    src = make_env_source(
        step="self.n = getattr(self, 'n', 0) + 1\nreturn ('x', float('nan') if self.n == 1 else 1.0, True, False, {})"
    )
    with OPEN(src, config=config) as env:
        env.reset()
        with pytest.raises(SandboxError) as caught:
            env.step("a")
        assert caught.value.reason is R.BAD_RETURN
        assert env.step("b")[1] == 1.0


def test_environment_exception_carries_type_and_text(config):
    err = expect(R.ENV_EXCEPTION, make_env_source(step="raise KeyError('the missing key')"), config)
    assert (
        "KeyError" in err.message and "the missing key" in err.message and "in step" in err.message
    )


# -- environments against each other ---------------------------------------------------
def test_an_environment_cannot_read_another_ones_state(permissive):
    secret = "victim-secret-41b2"
    victim_src = make_env_source(
        init=f"self.secret = {secret!r}\nopen('secret.txt', 'w').write(self.secret)"
    )
    with OPEN(victim_src, config=permissive) as victim:
        victim.reset()
        spy_step = f"""
import os
found = []
for path in [{victim.work_dir + "/secret.txt"!r}, '/work/secret.txt', '../secret.txt']:
    try:
        found.append(open(path).read())
    except OSError as exc:
        found.append(type(exc).__name__)
for n in range(1, 64):  # sibling work dirs of a pool's zygote
    try:
        found.append(open(f'/work/{{n}}/secret.txt').read())
    except OSError:
        pass
try:
    found.append(repr(os.listdir('/work')))
except OSError as exc:
    found.append(type(exc).__name__)
for pid in range(1, 64):
    try:
        found.append(open(f'/proc/{{pid}}/cmdline').read())
    except OSError:
        pass
return repr(found), 0.0, False, False, {{}}
"""
        seen = run_step(make_env_source(step=spy_step, header="import os"), permissive)
        assert secret not in seen
        assert "Error" in seen
        assert victim.step("still here")[0] == "obs"


def test_return_value_subclasses_cannot_run_code_unguarded(config):
    # __len__ of a tuple subclass runs while the worker inspects the return value.
    header = (
        "class Sneaky(tuple):\n    def __len__(self):\n        raise ValueError('inside __len__')"
    )
    err = expect(
        R.ENV_EXCEPTION,
        make_env_source(header=header, step="return Sneaky(('x', 0.0, False, False, {}))"),
        config,
    )
    assert "inside __len__" in err.message


def test_a_property_that_loops_is_stopped(config):
    src = make_env_source(extra="@property\ndef probe(self):\n    while True: pass\n")
    expect(R.TIMEOUT, src, config, op="call")


def test_a_forged_infrastructure_error_is_not_believed(permissive):
    # The environment finds the worker's request id on the stack and answers for it, claiming
    # a sandbox fault (which a trainer would not score); the host refuses the claim.
    step = """
import sys, os, json
frame = sys._getframe()
while frame is not None and 'rid' not in frame.f_locals:
    frame = frame.f_back
body = json.dumps({'id': frame.f_locals['rid'], 'ok': False, 'reason': 'infrastructure', 'message': 'not me'}).encode()
os.write(frame.f_locals['self'].reply_fd, len(body).to_bytes(4, 'big') + body)
while True:
    pass
"""
    err = expect(R.PROTOCOL_ERROR, make_env_source(header="import sys", step=step), permissive)
    assert "claimed an infrastructure fault" in err.message
