"""MKL's code path for the local backend's small-batch matrix products on AMD processors.

torch's float32 linear layers on CPU call MKL's ``sgemm``. On an AMD EPYC (Zen 4) VM MKL's
default dispatch ran the products of a decoding step at 4 rows (the quickstart's design
batch) at half the speed it reaches in its conditional-numerical-reproducibility mode
(``MKL_CBWR=AUTO``): SmolLM2-135M, 600 tokens of context, ms per decoding step, default /
AUTO: batch 1 59.6 / 60.6, batch 4 95.5 / 60.2, batch 8 108.7 / 82.3. The two modes sum in
a different order: logits differ by up to 4e-4, and in the quickstart every sampled token
was the same and the losses agreed to 7 digits.

MKL reads ``MKL_CBWR`` once, at the process's first call into it. `prefer_mkl_cnr` sets it
for that first call on an AMD CPU, unless the user set ``MKL_CBWR`` (which then wins), makes
the call, and puts the environment back, so child processes see what they saw before. In a
process that already made a matrix product it changes nothing. Not applied on Intel CPUs,
where MKL's default path was not measured slower.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

ENV = "MKL_CBWR"
MODE = "AUTO"
_CPUINFO = Path("/proc/cpuinfo")


def cpu_vendor(cpuinfo: Path = _CPUINFO) -> str | None:
    """The ``vendor_id`` of the first CPU in /proc/cpuinfo (e.g. ``AuthenticAMD``), or None."""
    try:
        with cpuinfo.open() as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return None


def wants_cnr(environ: dict[str, str] | os._Environ[str], vendor: str | None) -> bool:
    """Whether to ask MKL for its reproducible path: an AMD CPU, MKL in torch, no user choice."""
    return vendor == "AuthenticAMD" and ENV not in environ and torch.backends.mkl.is_available()


def prefer_mkl_cnr(vendor: str | None = None) -> str | None:
    """Start MKL in ``MKL_CBWR=AUTO`` mode on an AMD CPU (see the module docstring); returns
    the mode asked for, or None when nothing was done."""
    vendor = cpu_vendor() if vendor is None else vendor
    if not wants_cnr(os.environ, vendor):
        return None
    os.environ[ENV] = MODE
    try:
        torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # MKL reads the variable here, once
    finally:
        del os.environ[ENV]
    return MODE
