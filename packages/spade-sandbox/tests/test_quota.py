"""The disk quota's accounting: a directory remembered empty is stat'ed, not scanned, and any
entry made in it afterwards (even with its mtime set back) is still counted."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest
import spade_sandbox as ss
from conftest import OS_MODULES, make_env_source
from spade_sandbox import ReasonCode as R
from spade_sandbox.quota import QUIET_NS, DiskQuota, QuotaMeter

QUOTA = DiskQuota(max_bytes=16 * 1024, max_files=4)
QUIET_S = QUIET_NS / 1e9


def test_an_empty_directory_is_scanned_until_it_has_been_quiet(tmp_path):
    meter = QuotaMeter(QUOTA, str(tmp_path))
    os.utime(tmp_path)  # changed just now (the ctime too)
    assert meter.excess() is None and meter.excess() is None
    assert meter.scans == 2  # too recent to remember
    time.sleep(QUIET_S * 1.2)
    assert meter.excess() is None and meter.scans == 3  # scanned once more, remembered
    for _ in range(5):
        assert meter.excess() is None
    assert meter.scans == 3


def test_an_entry_made_after_the_directory_was_remembered_empty_is_counted(tmp_path):
    meter = QuotaMeter(QUOTA, str(tmp_path))
    time.sleep(QUIET_S * 1.2)
    assert meter.excess() is None and meter.excess() is None and meter.scans == 1
    (tmp_path / "big").write_bytes(b"x" * 64 * 1024)
    assert "Limits.max_disk_mib" in (meter.excess() or "")
    assert meter.scans == 2


def test_setting_the_mtime_back_does_not_hide_a_new_entry(tmp_path):
    meter = QuotaMeter(QUOTA, str(tmp_path))
    time.sleep(QUIET_S * 1.2)
    assert meter.excess() is None and meter.scans == 1
    before = os.stat(tmp_path)
    for i in range(6):
        (tmp_path / f"f{i}").touch()
    os.utime(tmp_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(tmp_path).st_mtime_ns == before.st_mtime_ns
    assert "Limits.max_disk_files" in (meter.excess() or "")


def test_a_directory_with_entries_is_always_scanned(tmp_path):
    (tmp_path / "small").write_bytes(b"x")
    meter = QuotaMeter(QUOTA, str(tmp_path))
    time.sleep(QUIET_S * 1.2)
    for _ in range(3):
        assert meter.excess() is None
    assert meter.scans == 3  # a file can grow without changing its directory


def test_a_missing_directory_counts_as_empty_and_is_never_remembered(tmp_path):
    meter = QuotaMeter(QUOTA, str(tmp_path / "gone"))
    assert meter.excess() is None and meter.excess() is None
    assert meter.scans == 2


@pytest.mark.parametrize("set_back", [False, True], ids=["plain", "mtime_set_back"])
def test_a_worker_filling_its_quiet_work_dir_is_killed(config, set_back):
    """A worker whose work dir stayed empty long enough to be remembered, then fills it."""
    write = "open('big', 'w').write('x' * (3 << 20))"
    if set_back:
        write = f"s = os.stat('.')\n{write}\nos.utime('.', ns=(s.st_atime_ns, s.st_mtime_ns))"
    step = f"if action == 'fill':\n    import os\n    {write.replace(chr(10), chr(10) + '    ')}\n"
    step += "return 'o', 0.0, False, False, {}"
    quota_config = config.replace(
        limits=dataclasses.replace(config.limits, max_disk_mib=2),
        allowed_imports=config.allowed_imports | OS_MODULES,
    )
    with ss.open_env(make_env_source(step=step), config=quota_config) as env:
        env.reset(0)
        time.sleep(QUIET_S * 1.2)
        for _ in range(3):  # the first measurement after the quiet time remembers it empty
            env.step("wait")
        with pytest.raises(ss.SandboxError) as info:
            env.step("fill")
        assert info.value.reason == R.DISK_QUOTA
