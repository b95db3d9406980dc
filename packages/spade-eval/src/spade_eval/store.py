"""Resumable per-item result store: JSONL, appended and fsynced once per batch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class RecordStore:
    """``records.jsonl`` in ``out_dir``: one record per (suite, item_id, sample).

    A torn last line (a run killed mid-write) is ignored, so that item is scored again.
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.path = Path(out_dir) / "records.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: dict[tuple[str, str, int], dict[str, Any]] = {}
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):
                # drop the torn tail so the next append starts on a fresh line
                text = text[: text.rfind("\n") + 1]
                with open(self.path, "r+", encoding="utf-8") as fh:
                    fh.truncate(len(text.encode("utf-8")))
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                    self.records[(rec["suite"], rec["item_id"], int(rec["sample"]))] = rec
                except (ValueError, KeyError, TypeError):
                    continue

    def has(self, suite: str, item_id: str, sample: int) -> bool:
        """True when this sample is already scored."""
        return (suite, item_id, sample) in self.records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Add records durably (one write, flush and fsync)."""
        records = list(records)
        if not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        for r in records:
            self.records[(r["suite"], r["item_id"], int(r["sample"]))] = r

    def suite_records(self, suite: str) -> list[dict[str, Any]]:
        """Every record of ``suite``."""
        return [r for (s, _, _), r in self.records.items() if s == suite]


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON through a temp file and ``os.replace``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
