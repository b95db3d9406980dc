"""The wire: frames, caps, JSON strictness, and the return-value checks both sides share."""

from __future__ import annotations

import json
import math
import os
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spade_sandbox import wire
from spade_sandbox.worker_layers import seccomp_program

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_frames_round_trip_any_json_value(value):
    r, w = os.pipe()
    try:
        wire.write_frame(w, {"value": value})
        assert wire.read_frame(r, wire.MAX_FRAME_BYTES) == {"value": value}
    finally:
        os.close(r)
        os.close(w)


def test_oversized_frame_is_refused_before_its_body_is_read():
    r, w = os.pipe()
    try:
        os.write(w, wire.HEADER.pack(10_000) + b"x" * 100)
        with pytest.raises(wire.FrameError) as caught:
            wire.read_frame(r, 1000)
        assert caught.value.kind == "too_large"
        os.write(w, wire.HEADER.pack(wire.MAX_FRAME_BYTES + 1))
        with pytest.raises(wire.FrameError) as caught:
            wire.read_frame(r, 10**12)
        assert caught.value.kind == "invalid"
    finally:
        os.close(r)
        os.close(w)


def test_nan_and_non_json_are_not_frames():
    with pytest.raises(ValueError):
        wire.encode({"x": math.nan})
    with pytest.raises(wire.FrameError, match="not valid JSON"):
        wire.decode(b'{"x": NaN}')
    with pytest.raises(wire.FrameError):
        wire.decode(b"\xff\xfe")


def test_eof_and_deadline():
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        with pytest.raises(TimeoutError):
            wire.read_frame(r, 100, deadline=0.0)
        os.close(w)
        with pytest.raises(wire.FrameError) as caught:
            wire.read_frame(r, 100, deadline=time.monotonic() + 5)
        assert caught.value.kind == "eof"
    finally:
        os.close(r)


def _frame_later(w: int, delay_s: float) -> threading.Thread:
    def write() -> None:
        time.sleep(delay_s)
        wire.write_frame(w, {"late": delay_s})

    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="polling needs two CPUs")
def test_reader_polls_then_sleeps_for_a_slow_peer():
    r, w = os.pipe()
    os.set_blocking(r, False)
    reader = wire.FrameReader(r)
    blocking = wire.FrameReader(os.dup(r))
    os.set_blocking(blocking.fd, True)
    try:
        assert reader.spins
        for delay in (0.0, 0.05):  # within the polling window, and long after it
            thread = _frame_later(w, delay)
            assert reader.read(100, deadline=time.monotonic() + 5) == {"late": delay}
            thread.join()
            thread = _frame_later(w, delay)
            assert blocking.read(100) == {"late": delay}  # a blocking read (no deadline)
            thread.join()
        with pytest.raises(TimeoutError):  # the deadline still holds
            reader.read(100, deadline=time.monotonic() + 0.01)
    finally:
        for fd in (r, w, blocking.fd):
            os.close(fd)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="polling needs two CPUs")
def test_a_reader_backs_off_polling_a_slow_peer_and_resumes_on_a_quick_one():
    r, w = os.pipe()
    reader = wire.FrameReader(r)
    try:
        after = []
        for _ in range(8):  # a peer that answers 20 ms later: every poll runs out
            thread = _frame_later(w, 0.02)
            reader.read(100)
            thread.join()
            after.append(reader.backoff)
        # polls on reads 1, 3 and 7, each followed by twice as many sleeping reads
        assert after == [1, 1, 3, 3, 3, 3, 7, 7]
        assert reader.skip == 6
        wire.write_frame(w, {"x": 1})  # a frame already there: the peer is quick again
        assert reader.read(100) == {"x": 1}
        assert (reader.backoff, reader.skip) == (0, 0)  # the next read polls
    finally:
        os.close(r)
        os.close(w)


def test_only_a_frame_later_than_a_wake_up_makes_a_reader_back_off():
    r, w = os.pipe()
    reader = wire.FrameReader(r)
    try:
        steps = []
        for _ in range(6):
            reader.after_wait(wire.SLOW_PEER_S * 10, polled_out=True)
            steps.append(reader.backoff)
        assert steps == [1, 3, 7, 15, 15, 15] and wire.SPIN_MAX_BACKOFF == 15
        reader.after_wait(wire.SLOW_PEER_S * 10, polled_out=False)  # a read that slept at once
        assert reader.backoff == 15
        # late by a wake-up only (a sequential peer whose reader slept): poll again at once,
        # so two readers backing off in turn cannot keep each other slow
        reader.after_wait(wire.SPIN_S * 4, polled_out=True)
        assert (reader.backoff, reader.skip) == (0, 0)
    finally:
        os.close(r)
        os.close(w)


def test_a_frame_nested_past_the_limit_is_refused_whatever_its_brackets():
    deep = b"[" * (wire.MAX_DEPTH + 1) + b"]" * (wire.MAX_DEPTH + 1)
    with pytest.raises(wire.FrameError, match="deeper than"):
        wire.decode(deep)
    at_limit = b"[" * wire.MAX_DEPTH + b"]" * wire.MAX_DEPTH
    assert wire.nesting_depth(wire.decode(at_limit)) == wire.MAX_DEPTH
    # brackets inside strings only make the check walk the value; they are not nesting
    text = json.dumps({"s": "[" * 500, "v": [[1]]}).encode()
    assert wire.decode(text) == {"s": "[" * 500, "v": [[1]]}


def test_reader_on_one_cpu_never_polls():
    allowed = os.sched_getaffinity(0)
    r, w = os.pipe()
    try:
        os.sched_setaffinity(0, {min(allowed)})
        reader = wire.FrameReader(r)
    finally:
        os.sched_setaffinity(0, allowed)
    try:
        wire.write_frame(w, {"x": 1})
        assert reader.read(100) == {"x": 1}
        assert not reader.spins
    finally:
        os.close(r)
        os.close(w)


@given(
    st.text(max_size=50),
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(-1000, 1000),
    st.booleans(),
    st.booleans(),
)
def test_valid_steps_pass_unchanged(obs, reward, terminated, truncated):
    assert wire.check_step((obs, reward, terminated, truncated, {"k": [1]}), 1000) == [
        obs,
        float(reward),
        terminated,
        truncated,
        {"k": [1]},
    ]


def test_checks_name_the_problem():
    with pytest.raises(wire.ValueCheckError, match="reward must be finite"):
        wire.check_step(("o", math.inf, False, False, {}), 100)
    with pytest.raises(wire.ValueCheckError) as caught:
        wire.check_reset(("x" * 200, {}), 100)
    assert caught.value.kind == "output_too_large"
    assert wire.decode(wire.encode(wire.check_reset(("o", {"t": (1, 2)}), 100))[4:]) == [
        "o",
        {"t": [1, 2]},
    ]


def test_seccomp_program_is_well_formed():
    prog = seccomp_program(own_pid=1234)
    assert len(prog) < 4096
    assert prog[-1] == (0x06, 0, 0, 0x7FFF0000)  # default: allow
    for i, (code, jt, jf, _k) in enumerate(prog):
        if code in (0x15, 0x45, 0x35):  # every jump lands inside the program
            assert i + 1 + max(jt, jf) < len(prog)
    assert (0x15, 1, 0, 1234) in prog  # signals to its own pid are allowed
