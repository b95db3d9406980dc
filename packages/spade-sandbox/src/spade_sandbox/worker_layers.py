"""The isolation layers the worker applies to itself, in the order `Worker.init` applies them:
preloading the allowed modules (while the interpreter's files are still readable), dropping to
uid 65534, dying with the parent, Landlock, rlimits and a seccomp filter. Each returns the
layer's state, "active[: detail]" or "unavailable: why".

Part of the in-sandbox worker program (see worker.py): standard library only.
"""

from __future__ import annotations

import builtins
import gc
import os
import sys
from collections.abc import Sequence

NOBODY = 65534


def preload(allowed: frozenset[str], python_path: Sequence[str] = ()) -> None:
    """Import the allowed modules and what the layers need while the interpreter's files are
    still readable; freeze them so the collector does not rescan them on every call.
    ``python_path``: directories searched after the standard library (allowed third-party
    modules such as numpy).

    The layers' own modules (ctypes, resource, struct) are loaded here, and so is the codec
    name resolution needs (``socket.getaddrinfo`` encodes host names with ``idna``): where
    uid 65534 cannot read the standard library later (an interpreter below a 0700 home, with
    no bubblewrap to mount it), a network attempt must still reach the seccomp filter and be
    typed ``forbidden_syscall``, not fail first as the environment's own LookupError."""
    for path in python_path:
        if path not in sys.path:
            sys.path.append(path)
    for name in sorted(allowed):
        try:
            builtins.__import__(name)
        except ImportError:
            pass
    import ctypes  # noqa: F401
    import encodings.idna  # noqa: F401
    import resource  # noqa: F401
    import struct  # noqa: F401

    gc.collect()
    gc.freeze()


def drop_uid() -> str:
    if os.getuid() != 0:
        return f"active: started unprivileged as uid {os.getuid()}"
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return f"active: uid {NOBODY}"


def die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL


def rlimits(limits: dict) -> str:
    import resource

    mib = 1024 * 1024
    wanted = {
        resource.RLIMIT_AS: int(limits["mem_mib"]) * mib,
        resource.RLIMIT_CPU: int(limits["cpu_s"]),
        resource.RLIMIT_NPROC: int(limits["max_procs"]),
        resource.RLIMIT_FSIZE: int(limits["max_file_mib"]) * mib,
        resource.RLIMIT_NOFILE: int(limits["max_open_files"]),
        resource.RLIMIT_CORE: 0,
    }
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value if which != resource.RLIMIT_CPU else value + 1))
    return (
        f"active: address space {limits['mem_mib']} MiB, CPU {limits['cpu_s']} s, {limits['max_procs']} processes, "
        f"files {limits['max_file_mib']} MiB, {limits['max_open_files']} fds, no core dumps"
    )


# Landlock (Linux >= 5.13) through raw system calls; x86_64 numbers.
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_FS_READ = 1 | 4 | 8  # execute, read_file, read_dir
_FILE_RIGHTS = 1 | 2 | 4 | (1 << 14)  # execute, write_file, read_file, truncate


def open_paths(read_paths: list[str], work_dir: str) -> list[tuple[int, str, bool]]:
    """O_PATH handles for the Landlock rules: (fd, "read" or "all", is a directory)."""
    handles = []
    for path, rights in [(p, "read") for p in read_paths] + [(work_dir, "all")]:
        handles.append((os.open(path, os.O_PATH | os.O_CLOEXEC), rights, os.path.isdir(path)))
    return handles


def _ruleset_attr(abi: int) -> list[int]:
    """The ruleset's handled rights for Landlock ABI ``abi``: filesystem (every right the ABI
    knows), then network and scopes where the ABI has them (no rule grants those)."""
    fs_all = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        fs_all |= 1 << 13  # refer
    if abi >= 3:
        fs_all |= 1 << 14  # truncate
    if abi >= 5:
        fs_all |= 1 << 15  # ioctl_dev
    attr = [fs_all]
    if abi >= 4:
        attr.append(1 | 2)  # net: bind_tcp, connect_tcp (no rule grants them)
    if abi >= 6:
        if len(attr) == 1:
            attr.append(0)
        attr.append(1 | 2)  # scoped: abstract unix sockets, signals to processes outside
    return attr


def landlock(handles: list[tuple[int, str, bool]]) -> str:
    """Restrict this process to `handles` (opened by `open_paths`; the caller closes them)."""
    import ctypes

    if os.uname().machine != "x86_64":
        return (
            f"unavailable: system call numbers are only known for x86_64, not {os.uname().machine}"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return f"unavailable: kernel has no Landlock ({os.strerror(ctypes.get_errno())})"
    attr = _ruleset_attr(abi)
    fs_all = attr[0]
    buf = (ctypes.c_uint64 * len(attr))(*attr)
    ruleset = libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET,
        ctypes.byref(buf),
        ctypes.c_size_t(ctypes.sizeof(buf)),
        ctypes.c_uint32(0),
    )
    if ruleset < 0:
        return f"unavailable: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        for fd, rights, is_dir in handles:
            access = _FS_READ if rights == "read" else fs_all
            # Files (not directories) take only file rights.
            rule = PathBeneath(access if is_dir else access & _FILE_RIGHTS, fd)
            if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                error = os.strerror(ctypes.get_errno())
                return f"unavailable: landlock_add_rule(fd {fd}) failed ({error})"
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed"
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"unavailable: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    extra = (", no TCP bind/connect" if abi >= 4 else "") + (
        ", signals only inside its domain" if abi >= 6 else ""
    )
    return f"active: ABI {abi}, reads only system and interpreter dirs, writes only its work dir{extra}"


# seccomp: a hand-built classic-BPF deny-list (x86_64).
_KILLED_SYSCALLS = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
    "syslog": 103, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114,
    "setgroups": 116, "setresuid": 117, "setresgid": 119, "rt_sigqueueinfo": 129,
    "personality": 135, "vhangup": 153, "pivot_root": 155, "chroot": 161, "acct": 163,
    "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "tkill": 200,
    "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "rt_tgsigqueueinfo": 297,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    # SysV IPC: workers forked from one zygote share an IPC namespace.
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
    "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220,
}  # fmt: skip
_SYS_CLONE, _SYS_CLONE3, _SYS_KILL, _SYS_TGKILL = 56, 435, 62, 234
_CLONE_THREAD = 0x10000
_SIGKILL = 9
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_KILL, _RET_ALLOW, _RET_ENOSYS = 0x80000000, 0x7FFF0000, 0x00050000 | 38
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def seccomp_program(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions: kill on the deny-list, new processes,
    signals to anything but this process, and SIGKILL to itself; clone3 answers ENOSYS so threads use clone."""
    arg0 = 16  # offsetof(struct seccomp_data, args[0]), low 32 bits on little-endian
    arg1, arg2 = arg0 + 8, arg0 + 16
    prog = [
        (_LD_ABS, 0, 0, 4),  # arch
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _RET_KILL),
        (_LD_ABS, 0, 0, 0),  # syscall number
        (_JGE, 0, 1, 0x40000000),  # x32 ABI
        (_RET, 0, 0, _RET_KILL),
    ]
    for nr in sorted(_KILLED_SYSCALLS.values()):
        prog += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _RET_KILL)]
    prog += [(_JEQ, 0, 1, _SYS_CLONE3), (_RET, 0, 0, _RET_ENOSYS)]
    # clone: only threads.
    prog += [(_JEQ, 0, 4, _SYS_CLONE), (_LD_ABS, 0, 0, arg0), (_JSET, 1, 0, _CLONE_THREAD),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    # kill(pid, sig): only 0 (own process group) or this process; tgkill(tgid, tid, sig): only
    # this process. Never SIGKILL: a SIGKILL the host did not send is then evidence of a kill
    # from outside the sandbox (an infrastructure fault), never the environment's own doing.
    prog += [(_JEQ, 0, 8, _SYS_KILL), (_LD_ABS, 0, 0, arg0), (_JEQ, 2, 0, 0), (_JEQ, 1, 0, own_pid),
             (_RET, 0, 0, _RET_KILL), (_LD_ABS, 0, 0, arg1), (_JEQ, 0, 1, _SIGKILL),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    prog += [(_JEQ, 0, 7, _SYS_TGKILL), (_LD_ABS, 0, 0, arg0), (_JEQ, 1, 0, own_pid),
             (_RET, 0, 0, _RET_KILL), (_LD_ABS, 0, 0, arg2), (_JEQ, 0, 1, _SIGKILL),
             (_RET, 0, 0, _RET_KILL), (_RET, 0, 0, _RET_ALLOW)]  # fmt: skip
    prog.append((_RET, 0, 0, _RET_ALLOW))
    return prog


def seccomp() -> str:
    import ctypes
    import struct

    if os.uname().machine != "x86_64":
        return (
            f"unavailable: system call numbers are only known for x86_64, not {os.uname().machine}"
        )
    prog = seccomp_program(os.getpid())
    raw = b"".join(struct.pack("=HBBI", *insn) for insn in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"unavailable: seccomp filter refused ({os.strerror(ctypes.get_errno())})"
    return f"active: {len(_KILLED_SYSCALLS)} system calls, new processes and foreign signals kill the worker"
