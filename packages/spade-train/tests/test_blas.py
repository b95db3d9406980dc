"""MKL's reproducible code path on AMD CPUs (backends/blas.py): when it is asked for, that it
leaves the environment as it was, and that generation agrees with MKL's default path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from spade_train.backends import blas


def test_the_vendor_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert blas.cpu_vendor(info) == "AuthenticAMD"
    info.write_text("processor\t: 0\n")
    assert blas.cpu_vendor(info) is None
    assert blas.cpu_vendor(tmp_path / "missing") is None


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch is built without MKL")
def test_only_an_amd_cpu_without_a_user_setting_asks_for_it():
    assert blas.wants_cnr({}, "AuthenticAMD")
    assert not blas.wants_cnr({}, "GenuineIntel")
    assert not blas.wants_cnr({}, None)
    assert not blas.wants_cnr({"MKL_CBWR": "COMPATIBLE"}, "AuthenticAMD")  # the user's wins


def test_nothing_is_done_on_another_vendor(monkeypatch):
    monkeypatch.delenv("MKL_CBWR", raising=False)
    assert blas.prefer_mkl_cnr(vendor="GenuineIntel") is None
    assert "MKL_CBWR" not in os.environ


GENERATE = """
import json, os, sys, torch
if sys.argv[1] == "default":
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # MKL starts in its default mode
from spade_train.backends import make_backend
from spade_train.types import SamplingParams
backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1)
chats = [[{"role": "user", "content": f"count to {n}"}] for n in (3, 10, 25, 99)]
gens = backend.generate(chats, SamplingParams(max_new_tokens=24, temperature=1.0, seed=5))
print(json.dumps({"mode": backend.mkl_mode, "env": os.environ.get("MKL_CBWR"),
                  "ids": [g.completion_ids for g in gens], "logprobs": [g.logprobs for g in gens]}))
"""


def _generate(first: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    done = subprocess.run(
        [sys.executable, "-c", GENERATE, first], env=env, capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_generation_agrees_with_mkls_default_path():
    default, chosen = _generate("default"), _generate("backend")
    amd = blas.cpu_vendor() == "AuthenticAMD" and torch.backends.mkl.is_available()
    assert chosen["mode"] == ("AUTO" if amd else None)
    assert chosen["env"] is None and default["env"] is None  # the environment is put back
    assert chosen["ids"] == default["ids"]
    for a, b in zip(chosen["logprobs"], default["logprobs"], strict=True):
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-4
