"""Disk quota of one sandbox: bytes and inodes under its private work directory.

Without a size-limited filesystem (the process backend binds a host directory, with or
without bubblewrap) the quota is kept by accounting: the host measures the work directory
after every call and every `POLL_S` while a call runs, and kills the worker the moment it
is over `Limits.max_disk_mib` or `Limits.max_disk_files` (reason `disk_quota`).
`RLIMIT_FSIZE` (`Limits.max_file_mib`) still caps each single file inside the kernel, so
between two measurements a worker can add at most what it writes in `POLL_S`. The Docker
backend's work directory is a tmpfs with the same size and inode limits, kept by the kernel.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

POLL_S = 0.05
"""How often the host measures the work directory while a call runs."""
QUIET_NS = 50_000_000
"""How long before a scan a directory must have last changed for `QuotaMeter` to remember it
empty: longer than the kernel's timestamp tick (1-10 ms), so any later change moves its ctime."""


@dataclass(frozen=True)
class DiskQuota:
    """The most a work directory may hold: bytes on disk and entries (inodes)."""

    max_bytes: int
    max_files: int

    def excess(self, path: str) -> str | None:
        """Why `path` is over this quota, or None while it is within it."""
        return self.judge(*disk_usage(path, self.max_files, self.max_bytes))

    def judge(self, used: int, files: int) -> str | None:
        """Why `used` bytes in `files` entries are over this quota, or None."""
        if files > self.max_files:
            return f"the work directory holds over {self.max_files} files (Limits.max_disk_files)"
        if used > self.max_bytes:
            return (
                f"the work directory holds over {self.max_bytes // (1024 * 1024)} MiB "
                "(Limits.max_disk_mib)"
            )
        return None


def disk_usage(path: str, max_files: int, max_bytes: int) -> tuple[int, int]:
    """(bytes allocated, entries) under `path`, without following links or recursing.

    Stops counting once either number is past its limit, so a hostile tree costs the host
    at most `max_files` + 1 entries of work. A missing directory counts as empty."""
    used = files = 0
    todo = [path]
    while todo:
        try:
            entries = os.scandir(todo.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                files += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    todo.append(entry.path)
                if files > max_files or used > max_bytes:
                    return used, files
    return used, files


class QuotaMeter:
    """Measures one work directory against a quota after every call, cheaply while it stays
    empty (most environments never write a file).

    A scan that finds the directory empty is remembered with the directory's inode, ctime and
    mtime, when its last change is over `QUIET_NS` old. The next measurement first stats the
    directory (one system call instead of five): while all three are unchanged no entry was
    created, so it is still empty. Creating, renaming or linking an entry moves mtime and
    ctime; setting the mtime back (`os.utime`) moves the ctime, which no unprivileged process
    can set. Otherwise the directory is scanned in full (`disk_usage`). This needs a
    filesystem that keeps a change time (ext4, xfs, btrfs, tmpfs, overlayfs; not FAT)."""

    def __init__(self, quota: DiskQuota, path: str) -> None:
        self.quota = quota
        self.path = path
        self.scans = 0
        """Full scans made (for tests and benchmarks)."""
        self._empty_as_of: tuple[int, int, int] | None = None

    def excess(self) -> str | None:
        """Why the directory is over the quota, or None while it is within it."""
        now = time.time_ns()
        try:
            info = os.stat(self.path)
        except OSError:
            info = None
        key = None if info is None else (info.st_ino, info.st_ctime_ns, info.st_mtime_ns)
        if key is not None and key == self._empty_as_of:
            return None
        self._empty_as_of = None
        self.scans += 1
        used, files = disk_usage(self.path, self.quota.max_files, self.quota.max_bytes)
        if files == 0 and key is not None and now - max(key[1], key[2]) >= QUIET_NS:
            self._empty_as_of = key
        return self.quota.judge(used, files)
