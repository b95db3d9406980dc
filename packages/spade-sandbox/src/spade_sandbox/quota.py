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
from dataclasses import dataclass

POLL_S = 0.05
"""How often the host measures the work directory while a call runs."""


@dataclass(frozen=True)
class DiskQuota:
    """The most a work directory may hold: bytes on disk and entries (inodes)."""

    max_bytes: int
    max_files: int

    def excess(self, path: str) -> str | None:
        """Why `path` is over this quota, or None while it is within it."""
        used, files = disk_usage(path, self.max_files, self.max_bytes)
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
