"""The wire protocol between host and worker: length-prefixed JSON frames, capped in size.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of UTF-8 JSON
(never pickle: nothing the child sends is ever executed by the host). NaN and infinities are
not valid JSON here. Both sides check the length against a cap before reading the body.

This module uses only the standard library and no package-relative imports, because the
worker (worker.py) imports it inside the sandbox, where spade_sandbox is not installed. It
also holds the return-value checks both sides apply (the host never trusts the worker's).

Messages (host -> worker), each with an integer "id" the reply echoes:
  {"op": "init", "limits": {...}, "allowed_imports": [...], "work_dir": str, "drop_uid": bool}
  {"op": "open", "source": str, "class_name": str|None, "kwargs": {...}}
  {"op": "reset", "seed": int|None}      {"op": "step", "action": str}
  {"op": "call", "method": str, "args": [...]}
  {"op": "reopen", "max_cpu_s": float} -> {"reopened": bool, "class_name": str, "cpu_s": float}
  {"op": "twins", "seed": int, "turns": int, "probes": [str], "budget_s": float} -> {"outcome": ...}
  {"op": "exec", "source": str, "stdin": str}      {"op": "close"}
Replies: {"id": n, "ok": true, "value": ...} or {"id": n, "ok": false, "reason": str, "message": str}.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Iterable

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Absolute cap on one frame; a header announcing more is a protocol error, not a big reply."""
FRAME_OVERHEAD_BYTES = 16 * 1024
"""Room for the JSON envelope and `info` beyond the output cap when sizing a reply cap."""
MAX_BATCH_STEPS = 32
"""The most actions one ``steps`` request takes (its reply holds up to this many results)."""
MAX_DEPTH = 64
"""Deepest nesting of lists and dicts a frame may carry (the envelope counts as one level)."""
SPIN_S = 50e-6
"""How long a reader polls (yielding the CPU between polls) before it sleeps in the kernel.
Waking a sleeping process on another CPU costs this VM ~100 us a round trip; a reply that
comes within the window is picked up at once. A reader made on a single CPU never polls:
there it would only delay the peer. A reader on a slow peer backs off (see SLOW_PEER_S)."""
SLOW_PEER_S = 1e-3
"""A frame that came this long after the read began (a worker waiting for the policy, or
for a play round's agent) makes a reader whose poll ran out back off: it sleeps at once for
its next 1, 3, 7, then 15 reads (`SPIN_MAX_BACKOFF`) before it polls again, so it polls on
about one read in 16. A frame that came sooner ends the back-off: a sequential peer that is
only late by a wake-up (~100 us here) is polled for again at once, so two readers never
keep each other slow by backing off in turn."""
SPIN_MAX_BACKOFF = 15
"""The most reads a reader sleeps through at once before it polls again."""
EXIT_CHANNEL_BROKEN = 70
"""The worker's exit status when its channel breaks (the host reports `protocol_error`)."""


class FrameError(Exception):
    """A frame could not be read or written; `kind` is "eof", "too_large" or "invalid"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ValueCheckError(Exception):
    """A return value broke the contract; `kind` is "bad_return" or "output_too_large"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed in a frame")


# Built once: json.dumps/loads with options build a new coder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def encode(message: object) -> bytes:
    """One frame holding `message` (raises ValueError/TypeError for non-JSON data)."""
    body = _ENCODER.encode(message).encode()
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError("too_large", f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def nesting_depth(value: object, limit: int = MAX_DEPTH) -> int:
    """How deeply `value` nests lists and dicts, counted without recursion up to `limit` + 1."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        todo.extend((child, depth + 1) for child in children)
    return deepest


def decode(body: bytes) -> object:
    """The message of one frame body; FrameError("invalid") for bad JSON or nesting past
    `MAX_DEPTH` (a reply nested 100,000 deep must not exhaust the host's stack)."""
    try:
        value = _DECODER.decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError("invalid", f"frame is not valid JSON: {exc}") from None
    except RecursionError:
        raise FrameError("invalid", "frame is nested too deeply to decode") from None
    # Each level opens with a bracket, so a body with at most MAX_DEPTH of them (in strings
    # or not) cannot nest deeper: the walk is needed only above that.
    brackets = body.count(b"[") + body.count(b"{")
    if brackets > MAX_DEPTH and nesting_depth(value) > MAX_DEPTH:
        raise FrameError("invalid", f"frame nests lists or dicts deeper than {MAX_DEPTH} levels")
    return value


def write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    """Write every byte; with a deadline the fd must be non-blocking and select() waits."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            n = 0
        except (BrokenPipeError, ConnectionResetError):
            raise FrameError("eof", "the other side closed the channel") from None
        view = view[n:]
        if view and deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("write did not finish before the deadline")
            select.select([], [fd], [], left)


class FrameReader:
    """Reads frames from one fd through a buffer: usually one read() per frame.

    With a deadline the fd must be non-blocking; select() waits only when no byte is there.
    `pending` tells whether bytes beyond the last frame arrived (unsolicited data)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.spins = len(os.sched_getaffinity(0)) > 1 if hasattr(os, "sched_getaffinity") else True
        self.backoff = 0  # reads to sleep through after the next poll that runs out on a slow peer
        self.skip = 0  # reads left that sleep at once

    def _spin(self) -> bool | None:
        """Poll the fd for up to SPIN_S (not on one CPU, not while backing off): True once it
        is readable, False when the poll ran out, None when no poll was made."""
        if not self.spins:
            return None
        if self.skip:
            self.skip -= 1
            return None
        end = time.monotonic() + SPIN_S
        while True:
            if select.select([self.fd], [], [], 0)[0]:
                return True
            if time.monotonic() >= end:
                return False
            os.sched_yield()

    def after_wait(self, waited_s: float, polled_out: bool) -> None:
        """Adjust the back-off once a frame's first bytes came `waited_s` after the read began
        (`polled_out`: this read polled in vain first); see SLOW_PEER_S."""
        if waited_s <= SLOW_PEER_S:
            self.backoff = self.skip = 0
        elif polled_out:
            self.backoff = self.skip = min(2 * self.backoff + 1, SPIN_MAX_BACKOFF)

    @property
    def pending(self) -> bool:
        return bool(self.buffer)

    def _fill(self, want: int, deadline: float | None, poll=None, poll_s: float = 0.05) -> None:
        # The reply is rarely there yet when this is called (the request was just sent): poll
        # briefly, then wait in select() (deadline or poll) or in a blocking read.
        began = time.monotonic()
        spun = self._spin()
        ready = bool(spun)
        if not ready and deadline is None and poll is None:
            ready = True  # a blocking read waits in the kernel
        while True:
            if not ready:
                left = deadline - time.monotonic() if deadline is not None else None
                if left is not None and left <= 0:
                    raise TimeoutError("read did not finish before the deadline")
                if poll is not None:
                    left = poll_s if left is None else min(left, poll_s)
                ready = bool(select.select([self.fd], [], [], left)[0])
                if not ready:
                    if poll is not None:
                        poll()  # may raise: the caller's check while the other side works
                    continue
            try:
                chunk = os.read(self.fd, min(max(want - len(self.buffer), 1 << 16), 1 << 20))
            except BlockingIOError:  # readable, then not (or a non-blocking fd with no deadline)
                ready = False
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise FrameError("eof", "the other side closed the channel")
            self.buffer += chunk
            if spun is not True and self.spins:
                self.after_wait(time.monotonic() - began, spun is False)
            else:
                self.backoff = 0
            return

    def read(self, max_bytes: int, deadline: float | None = None, poll=None) -> object:
        """One frame; a body over `max_bytes` is FrameError("too_large") before it is read.

        `poll`, when given, is called about every 50 ms while no byte arrives."""
        while len(self.buffer) < HEADER.size:
            self._fill(HEADER.size, deadline, poll)
        (size,) = HEADER.unpack_from(self.buffer)
        if size > MAX_FRAME_BYTES:
            raise FrameError(
                "invalid", f"frame header announces {size} bytes, over the {MAX_FRAME_BYTES} cap"
            )
        if size > max_bytes:
            raise FrameError("too_large", f"reply of {size} bytes exceeds the {max_bytes}-byte cap")
        end = HEADER.size + size
        while len(self.buffer) < end:
            self._fill(end, deadline)
        body = bytes(self.buffer[HEADER.size : end])
        del self.buffer[:end]
        return decode(body)


def write_frame(fd: int, message: object, deadline: float | None = None) -> None:
    write_all(fd, encode(message), deadline)


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytes:
    """Read exactly `size` bytes and no more; FrameError("eof") if the channel closes first."""
    chunks = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("read did not finish before the deadline")
            if not select.select([fd], [], [], left)[0]:
                continue
        try:
            chunk = os.read(fd, min(size, 1 << 20))
        except BlockingIOError:
            continue
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise FrameError("eof", "the other side closed the channel")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int, deadline: float | None = None) -> object:
    """Read one frame and not a byte past it (a loop over one fd is faster with FrameReader)."""
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size, deadline))
    if size > MAX_FRAME_BYTES:
        raise FrameError(
            "invalid", f"frame header announces {size} bytes, over the {MAX_FRAME_BYTES} cap"
        )
    if size > max_bytes:
        raise FrameError("too_large", f"reply of {size} bytes exceeds the {max_bytes}-byte cap")
    return decode(read_exact(fd, size, deadline))


def check_json(value: object, what: str, max_bytes: int) -> object:
    """`value` itself when it is JSON data within `max_bytes` once encoded; raise otherwise."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValueCheckError("bad_return", f"{what} is not JSON data: {exc}") from None
    except RecursionError:
        raise ValueCheckError("bad_return", f"{what} is nested too deeply to be JSON") from None
    if nesting_depth(value, MAX_DEPTH - 4) > MAX_DEPTH - 4:  # room for the reply envelope
        raise ValueCheckError(
            "bad_return", f"{what} nests lists or dicts deeper than {MAX_DEPTH - 4} levels"
        )
    if len(text) > max_bytes:
        raise ValueCheckError(
            "output_too_large", f"{what} is {len(text)} bytes, over the {max_bytes}-byte cap"
        )
    return value


def _check_text(value: object, what: str, max_bytes: int) -> str:
    if type(value) is not str:
        raise ValueCheckError("bad_return", f"{what} must be a str, got {type(value).__name__}")
    # UTF-8 takes at most 4 bytes a character: short strings need no encoding to be measured.
    if len(value) * 4 > max_bytes and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValueCheckError("output_too_large", f"{what} is over the {max_bytes}-byte cap")
    return value


def _check_info(value: object, what: str, max_bytes: int, decoded: bool) -> dict:
    if not isinstance(value, dict):
        raise ValueCheckError("bad_return", f"{what} must be a dict, got {type(value).__name__}")
    return value if decoded else check_json(value, what, max_bytes)  # type: ignore[return-value]


def check_reset(value: object, max_bytes: int, decoded: bool = False) -> list:
    """Validate `reset()`'s return: (observation: str, info: dict) -> [obs, info].

    `decoded=True` (the host) skips the JSON round trip of `info`: it just came out of a
    size-capped frame, so it is JSON data already."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        shape = (
            f"a {type(value).__name__} of length {len(value)}"
            if isinstance(value, (tuple, list))
            else type(value).__name__
        )
        raise ValueCheckError("bad_return", f"reset() must return (observation, info), got {shape}")
    return [
        _check_text(value[0], "reset() observation", max_bytes),
        _check_info(value[1], "reset() info", max_bytes, decoded),
    ]


def check_step(value: object, max_bytes: int, decoded: bool = False) -> list:
    """Validate `step()`'s return: (obs: str, reward: finite number, terminated: bool, truncated: bool, info: dict)."""
    if not isinstance(value, (tuple, list)) or len(value) != 5:
        shape = (
            f"a {type(value).__name__} of length {len(value)}"
            if isinstance(value, (tuple, list))
            else type(value).__name__
        )
        raise ValueCheckError(
            "bad_return",
            f"step() must return (observation, reward, terminated, truncated, info), got {shape}",
        )
    obs, reward, terminated, truncated, info = value
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise ValueCheckError(
            "bad_return", f"step() reward must be a number, got {type(reward).__name__}"
        )
    try:
        reward = float(reward)
    except OverflowError:
        raise ValueCheckError("bad_return", "step() reward is too large for a float") from None
    if not math.isfinite(reward):
        raise ValueCheckError("bad_return", f"step() reward must be finite, got {reward}")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if type(flag) is not bool:
            raise ValueCheckError(
                "bad_return", f"step() {name} must be a bool, got {type(flag).__name__}"
            )
    return [
        _check_text(obs, "step() observation", max_bytes),
        reward,
        terminated,
        truncated,
        _check_info(info, "step() info", max_bytes, decoded),
    ]
