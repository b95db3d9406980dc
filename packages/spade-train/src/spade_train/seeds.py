"""Every random choice of a run is seeded from ``(run seed, cycle, purpose, index…)``, so any
cycle, design or episode can be replayed on its own."""

from __future__ import annotations

import hashlib
import json


def derive_seed(*parts: object) -> int:
    """A 31-bit seed derived from ``parts`` (stable across processes and Python versions)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
