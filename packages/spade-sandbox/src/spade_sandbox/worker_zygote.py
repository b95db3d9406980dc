"""The fork server of a `SandboxPool`: one preloaded interpreter that forks fresh workers.

Part of the in-sandbox worker program (see worker.py): standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

if __package__:
    from . import wire, worker_layers
else:  # run as files in one directory inside the sandbox (see worker.py)
    import wire  # type: ignore[no-redef]
    import worker_layers  # type: ignore[no-redef]


def zygote(control_fd: int, serve: Callable[[int, int], None]) -> None:
    """Fork server: preload once, then fork one fresh worker per request; ``serve(request_fd,
    reply_fd)`` runs a worker in the child.

    The control channel is a SOCK_SEQPACKET unix socket; each message is one JSON object.
    Host -> zygote: {"op": "preload", "allowed_imports": [...]}, then
    {"op": "fork", "id": n, "work_dir": path} carrying three fds (the worker's request and
    reply ends and its private stderr file) and {"op": "kill", "pid": p}. Zygote -> host: {"event": "ready"},
    {"event": "forked", "id": n, "pid": p}, {"event": "exit", "pid": p, "status": s, "cpu_s": c}
    (s < 0: killed by signal -s; c: the CPU seconds it used). A forked child is an ordinary worker: the host sends it
    `init` over its own channel, and it applies every layer itself. The zygote runs no
    untrusted code; when the host closes the socket it kills its children and exits.
    """
    # Imported here, not at the top: a plain worker never loads them (their classes would
    # otherwise be reachable from the environment through object.__subclasses__()).
    import json
    import select
    import signal
    import socket

    sock = socket.socket(fileno=control_fd)
    children: dict[int, int] = {}  # pidfd -> pid

    def send(message: dict) -> None:
        sock.send(json.dumps(message).encode())

    while True:
        ready = select.select([sock.fileno(), *children], [], [])[0]
        for fd in ready:
            if fd in children:
                pid = children.pop(fd)
                os.close(fd)
                _, status, usage = os.wait4(pid, 0)
                cpu = round(usage.ru_utime + usage.ru_stime, 3)
                send(
                    {
                        "event": "exit",
                        "pid": pid,
                        "status": os.waitstatus_to_exitcode(status),
                        "cpu_s": cpu,
                    }
                )
                continue
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
            if not data:
                for pid in children.values():
                    os.kill(pid, signal.SIGKILL)
                os._exit(0)
            msg = json.loads(data)
            if msg["op"] == "preload":
                worker_layers.preload(frozenset(msg["allowed_imports"]), msg.get("python_path", ()))
                send({"event": "ready"})
            elif msg["op"] == "kill":
                if msg["pid"] in children.values():
                    os.kill(msg["pid"], signal.SIGKILL)
            elif msg["op"] == "fork":
                pid = _fork(msg["work_dir"], fds, sock, children, serve)
                children[os.pidfd_open(pid)] = pid
                send({"event": "forked", "id": msg["id"], "pid": pid})


def _fork(
    work_dir: str,
    fds: list[int],
    sock: socket.socket,
    children: dict[int, int],
    serve: Callable[[int, int], None],
) -> int:
    """Fork one worker in a fresh ``work_dir`` on the received ``fds`` (request, reply,
    stderr); the parent closes its copies of them and gets the child's pid."""
    os.mkdir(work_dir, 0o700)
    if os.getuid() == 0:
        os.chown(work_dir, worker_layers.NOBODY, worker_layers.NOBODY)
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()
            for other in children:
                os.close(other)
            os.setsid()
            # A private stderr (fds[2]) replaces the zygote's, which every
            # sibling would otherwise share and could read back.
            os.dup2(fds[2], 2)
            os.close(fds[2])
            serve(fds[0], fds[1])
        finally:
            os._exit(wire.EXIT_CHANNEL_BROKEN)
    for received in fds:
        os.close(received)
    return pid
