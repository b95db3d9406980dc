"""The in-sandbox worker: loads untrusted environment source and serves calls over the wire.

How a backend launches it
-------------------------
Standard library only, no installation needed: copy (or bind-mount read-only) the worker's
modules (`WORKER_MODULES`: this file, `wire.py`, `worker_state.py`, `worker_layers.py`,
`worker_env.py`, `worker_twins.py`, `worker_zygote.py`) into one directory inside the sandbox and run

    python3 -S -B /that/dir/worker.py            # protocol on stdin (fd 0) / stdout (fd 1)
    python3 -S -B /that/dir/worker.py --fds 3,4  # protocol on fds 3 (requests) and 4 (replies)
    python3 -S -B /that/dir/worker.py --zygote   # fork server on a unix socket at fd 0 (see zygote())

(`python -m spade_sandbox.worker` works too where the package is installed.) Requests arrive
as frames (see wire.py) on the request fd and replies leave on the reply fd. At start the
worker moves the protocol to private descriptors and points fds 0 and 1 at /dev/null, so
nothing the environment prints or writes can corrupt the channel; `print` output is captured
per call and capped. fd 2 is left as the backend passed it: only interpreter crash messages
land there. Start it as root (it drops to uid 65534 itself) or as an unprivileged user.

The first request must be `init`. It applies, in this order: preloading the allowed modules,
chdir to the work dir, dropping to uid 65534 (when root and asked to), Landlock (writes only
under the work dir, reads only under `read_paths`), rlimits, a seccomp filter, and the import
policy. Its reply lists each layer as "active" or "unavailable: why". Then `open`, `reset`,
`step`, `call`, `snapshot`, `restore`, `twins` (worker_twins.py: does hidden randomness
decide the answer), `reopen` (the same source constructed again, see
`EnvHost.reopen`), `exec` (one-off scripts) and `close` follow. Exit status: 0 after `close`,
70 when the channel breaks (the host reports `protocol_error`), signals as the kernel sends
them (SIGSYS from seccomp: `forbidden_syscall`; SIGXCPU: `timeout`).

The program by concern: this module holds the protocol loop and the order in which `init`
applies the layers; worker_layers.py the layers themselves; worker_env.py the environment's
side (import policy, captured output, the calls); worker_state.py copies of its state and the
heap padding; worker_zygote.py the fork server of a pool.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

if __package__:
    from . import wire, worker_env, worker_layers, worker_twins, worker_zygote
else:  # run as a file next to the other worker modules
    import wire  # type: ignore[no-redef]
    import worker_env  # type: ignore[no-redef]
    import worker_layers  # type: ignore[no-redef]
    import worker_twins  # type: ignore[no-redef]
    import worker_zygote  # type: ignore[no-redef]

EXIT_CHANNEL_BROKEN = wire.EXIT_CHANNEL_BROKEN
CallError = worker_env.CallError


class Worker:
    """One worker: the protocol on two private fds, the layers `init` applies, and the
    environment (`worker_env.EnvHost`) the other requests go to."""

    def __init__(self, request_fd: int, reply_fd: int) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.host = worker_env.EnvHost()
        host = self.host
        self.handlers: dict[str, Callable[[dict], object]] = {
            "init": self.init,
            "open": host.open,
            "reset": host.reset,
            "step": host.step,
            "steps": host.steps,
            "call": host.call,
            "snapshot": host.snapshot,
            "restore": host.restore,
            "reopen": host.reopen,
            "exec": host.exec_script,
            "twins": lambda msg: worker_twins.serve(host, msg),
        }

    # -- isolation -----------------------------------------------------------------------
    def init(self, msg: dict) -> dict:
        limits = msg["limits"]
        host = self.host
        host.max_output = int(limits["max_output_kib"]) * 1024
        host.allowed = frozenset(msg["allowed_imports"])
        apply = set(msg.get("apply", ("unprivileged_uid", "landlock", "rlimits", "seccomp")))
        layers: dict[str, str] = {}
        worker_layers.preload(host.allowed, msg.get("python_path", ()))
        work_dir = host.work_dir = msg["work_dir"]
        os.chdir(work_dir)
        # Landlock's paths are opened while still privileged: a work root below a directory
        # uid 65534 cannot traverse (a 0700 parent) stays reachable through these handles.
        read_paths = [p for p in msg.get("read_paths", []) if os.path.exists(p)]
        handles = worker_layers.open_paths(read_paths, work_dir) if "landlock" in apply else []
        off = "unavailable: not requested"
        try:
            layers["unprivileged_uid"] = (
                worker_layers.drop_uid() if "unprivileged_uid" in apply else off
            )
            worker_layers.die_with_parent()
            os.environ["HOME"] = work_dir  # expanduser("~") needs no password database then
            layers["landlock"] = worker_layers.landlock(handles) if "landlock" in apply else off
        finally:
            for fd, _, _ in handles:
                os.close(fd)
        layers["rlimits"] = worker_layers.rlimits(limits) if "rlimits" in apply else off
        layers["seccomp"] = worker_layers.seccomp() if "seccomp" in apply else off
        layers["import_policy"] = host.start()
        gc.collect()
        gc.freeze()
        return {
            "layers": layers,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
        }

    def _with_stepped(self, reply: dict) -> dict:
        """An error reply to ``steps`` with the results of the steps before the failing one."""
        if self.host.stepped is not None:
            reply["stepped"] = self.host.stepped
            self.host.stepped = None
        return reply

    # -- loop ----------------------------------------------------------------------------
    def reply(self, frame: bytes) -> None:
        try:
            wire.write_all(self.reply_fd, frame)
        except (wire.FrameError, OSError):
            os._exit(EXIT_CHANNEL_BROKEN)

    def serve(self) -> None:
        requests = wire.FrameReader(self.request_fd)
        while True:
            try:
                msg = requests.read(wire.MAX_FRAME_BYTES)
            except (wire.FrameError, OSError):
                os._exit(EXIT_CHANNEL_BROKEN)
            if not isinstance(msg, dict):
                os._exit(EXIT_CHANNEL_BROKEN)
            if msg.get("op") == "close":
                self.host.close_env()
                self.reply(wire.encode({"id": msg.get("id"), "ok": True, "value": None}))
                os._exit(0)
            answer, fatal = self.answer(msg)
            try:
                frame = wire.encode(answer)
            except (TypeError, ValueError, wire.FrameError) as exc:
                frame = wire.encode(
                    {
                        "id": answer["id"],
                        "ok": False,
                        "reason": "bad_return",
                        "message": f"reply is not JSON: {exc}",
                    }
                )
            self.reply(frame)
            if fatal:
                os._exit(0)

    def answer(self, msg: dict) -> tuple[dict, bool]:
        """The reply to one request, and whether the worker must exit after sending it."""
        rid, op = msg.get("id"), msg.get("op")
        self.host.stepped = None
        try:
            handler = self.handlers.get(str(op))
            if handler is None:
                raise CallError("protocol_error", f"unknown op {op!r}")
            return {"id": rid, "ok": True, "value": handler(msg)}, False
        except CallError as exc:
            reply = {"id": rid, "ok": False, "reason": exc.reason, "message": str(exc)}
            return self._with_stepped(reply), exc.fatal
        except wire.ValueCheckError as exc:
            reply = {"id": rid, "ok": False, "reason": exc.kind, "message": str(exc)}
            return self._with_stepped(reply), False
        except MemoryError:
            message = "the worker ran out of memory"
            return {"id": rid, "ok": False, "reason": "memory", "message": message}, True
        except (KeyError, TypeError) as exc:
            message = f"malformed request: {exc!r}"
            return {"id": rid, "ok": False, "reason": "protocol_error", "message": message}, False


def _serve(request_fd: int, reply_fd: int) -> None:
    Worker(request_fd, reply_fd).serve()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    request_fd, reply_fd = 0, 1
    if len(argv) == 2 and argv[0] == "--fds":
        request_fd, reply_fd = (int(x) for x in argv[1].split(","))
    # Private copies of the channel; 0 and 1 then point at /dev/null.
    request_fd, reply_fd = os.dup(request_fd), os.dup(reply_fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    if argv == ["--zygote"]:
        os.close(reply_fd)
        worker_zygote.zygote(request_fd, _serve)
    else:
        _serve(request_fd, reply_fd)


if __name__ == "__main__":
    main()
