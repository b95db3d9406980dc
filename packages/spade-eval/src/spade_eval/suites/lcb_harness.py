"""The grading program run inside spade-sandbox for one LiveCodeBench answer.

It reads ``{"code", "fn_name", "inputs", "outputs", "timeout_s", "nonce"}`` from stdin, runs
the tests in order under a per-test alarm, stops at the first failure (as the official runner
does) and prints one line ``<nonce> {"verdict", "passed", "detail"}``. Verdicts: ``pass``,
``compile_error``, ``wrong_answer``, ``runtime_error``, ``time_limit``. Functional tests
(``fn_name`` set) call the function (a method of ``Solution`` when the code defines that
class) with the JSON values of the input's lines and compare with the JSON output, tuples read
as lists; stdin tests run the program as ``__main__`` on the input and compare stripped lines,
exactly or as decimals.
"""

HARNESS = r'''
import io
import json
import signal
import sys
from decimal import Decimal, InvalidOperation

PRELUDE = """from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics
import itertools, functools, operator, io, sys, json
sys.setrecursionlimit(50000)
"""

spec = json.loads(sys.stdin.read())
nonce, limit = spec.pop("nonce"), max(1, int(spec["timeout_s"]))
real_stdout = sys.stdout


class Late(BaseException):
    pass


def on_alarm(signum, frame):
    raise Late()


def finish(verdict, passed, detail=""):
    signal.alarm(0)
    sys.stdout = real_stdout
    print(nonce, json.dumps({"verdict": verdict, "passed": passed, "detail": str(detail)[:300]}))
    sys.stdout.flush()
    raise SystemExit(0)


def same_lines(got, want):
    a = [line.strip() for line in got.strip().split("\n")]
    b = [line.strip() for line in want.strip().split("\n")]
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            if [Decimal(t) for t in x.split()] != [Decimal(t) for t in y.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


def guarded(run):
    signal.alarm(limit)
    try:
        return "ok", run()
    except Late:
        return "time_limit", None
    except SystemExit:
        return "ok", None
    except BaseException as exc:
        return "runtime_error", repr(exc)
    finally:
        signal.alarm(0)


signal.signal(signal.SIGALRM, on_alarm)
source = PRELUDE + "\n" + spec["code"]
sink = io.StringIO()
try:
    program = compile(source, "<solution>", "exec")
except BaseException as exc:
    finish("compile_error", 0, repr(exc))
fn_name = spec.get("fn_name")
if fn_name:
    space = {"__name__": "solution"}
    sys.stdout = sink
    state, err = guarded(lambda: exec(program, space))
    sys.stdout = real_stdout
    if state != "ok" or err is not None:
        finish("compile_error", 0, err or state)
    fn = space.get(fn_name)
    if "class Solution" in spec["code"] and "Solution" in space:
        state, target = guarded(lambda: space["Solution"]())
        fn = getattr(target, fn_name, None)
    if not callable(fn):
        finish("compile_error", 0, "no function " + fn_name)
for i, (inp, out) in enumerate(zip(spec["inputs"], spec["outputs"])):
    if fn_name:
        args = [json.loads(line) for line in inp.split("\n")]
        sys.stdout = sink
        state, got = guarded(lambda: fn(*args))
        sys.stdout = real_stdout
        if state != "ok":
            finish(state, i, got)
        if isinstance(got, tuple):
            got = list(got)
        if got != json.loads(out):
            finish("wrong_answer", i, repr(got))
    else:
        buf = io.StringIO()
        sys.stdin, sys.stdout = io.StringIO(inp), buf
        state, err = guarded(lambda: exec(program, {"__name__": "__main__"}))
        sys.stdout = real_stdout
        if state != "ok":
            finish(state, i, err)
        if not same_lines(buf.getvalue(), out):
            finish("wrong_answer", i, buf.getvalue())
finish("pass", len(spec["inputs"]))
'''
