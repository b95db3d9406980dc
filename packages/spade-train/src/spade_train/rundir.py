"""The run directory: resolved config, metrics, designs, transcripts, checkpoints, plots.

Layout (the documentation's "The run directory" page describes every file)::

    RUN_DIR/
      config.yaml                 the resolved recipe (``spade resume`` reads it back)
      metrics.jsonl               one JSON object per finished cycle
      designs/cycle_0001.jsonl    every designer completion: text, parse result, validation report
      transcripts/cycle_0001/     a few episode transcripts per cycle (JSON)
      pool.json, memory.json      the latest environment pool and memory
      checkpoints/cycle_0001/     policy/ (a Hugging Face model directory, local backend),
                                  policy.trainer.pt (optimizer, RNG), state.json (loop state)
      checkpoints/LATEST          name of the newest complete checkpoint
      plots/*.png                 curriculum plots, redrawn after every cycle

Every file is written atomically (temp file, then rename): a crash at any point leaves either
the old or the new version, never a torn one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spade_train.errors import RunDirError


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def read_jsonl(path: Path, torn: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file (none when it does not exist).

    A line that is not JSON is an error naming it, except the last line when ``torn`` is
    given: a process killed while appending leaves its last line cut short, so that line is
    skipped and a warning saying so is appended to ``torn``."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if torn is None or number != last:
                raise RunDirError(f"{path}: line {number} is not JSON ({exc.msg})") from None
            torn.append(
                f"{path}: its last line ({number}) is cut short, as a run killed while "
                "writing leaves it; skipped"
            )
    return rows


class RunDir:
    """Paths and atomic writers of one run directory."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.warnings: list[str] = []
        """What reading the run skipped (a torn last metrics line), for the caller to show."""

    config = property(lambda self: self.root / "config.yaml")
    metrics = property(lambda self: self.root / "metrics.jsonl")
    designs = property(lambda self: self.root / "designs")
    transcripts = property(lambda self: self.root / "transcripts")
    checkpoints = property(lambda self: self.root / "checkpoints")
    plots = property(lambda self: self.root / "plots")

    def create(self) -> RunDir:
        for d in (self.root, self.designs, self.transcripts, self.checkpoints, self.plots):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def cycle_name(self, cycle: int) -> str:
        return f"cycle_{cycle:04d}"

    # metrics -------------------------------------------------------------------------------
    def read_metrics(self) -> list[dict[str, Any]]:
        """Every finished cycle's row; a torn last line is skipped (see :attr:`warnings`)."""
        torn: list[str] = []
        rows = read_jsonl(self.metrics, torn)
        self.warnings += [w for w in torn if w not in self.warnings]
        return rows

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Add one cycle's metrics (rewrites the file atomically; it is small)."""
        rows = [r for r in self.read_metrics() if r.get("cycle") != row.get("cycle")]
        write_jsonl(self.metrics, [*rows, row])

    def truncate_metrics(self, last_cycle: int) -> None:
        """Drop metrics of cycles after ``last_cycle`` (they are redone after a resume)."""
        rows = self.read_metrics()
        kept = [r for r in rows if int(r.get("cycle", 0)) <= last_cycle]
        if len(kept) != len(rows):
            write_jsonl(self.metrics, kept)

    # checkpoints ---------------------------------------------------------------------------
    def latest_checkpoint(self) -> Path | None:
        marker = self.checkpoints / "LATEST"
        if not marker.exists():
            return None
        path = self.checkpoints / marker.read_text().strip()
        if not (path / "state.json").exists():
            raise RunDirError(
                f"{marker} names {path.name}, which is incomplete; delete {marker} to start over"
            )
        return path

    def begin_checkpoint(self, cycle: int) -> Path:
        """A fresh temp directory to write checkpoint ``cycle`` into (see commit_checkpoint)."""
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{self.cycle_name(cycle)}.", dir=self.checkpoints))

    def commit_checkpoint(self, tmp: Path, cycle: int, keep: int) -> Path:
        """Rename the completed ``tmp`` into place, point LATEST at it, prune old ones."""
        final = self.checkpoints / self.cycle_name(cycle)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        atomic_write_text(self.checkpoints / "LATEST", final.name + "\n")
        done = sorted(p for p in self.checkpoints.glob("cycle_*") if p.is_dir())
        for old in done[: max(0, len(done) - max(1, keep))]:
            shutil.rmtree(old, ignore_errors=True)
        for stale in self.checkpoints.glob(".cycle_*"):  # temp dirs of crashed writes
            shutil.rmtree(stale, ignore_errors=True)
        return final
