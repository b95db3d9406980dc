"""What a run shows while it runs: a progress display per cycle stage and a one-line summary
of each finished cycle."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

from rich.progress import TaskID

from spade_train.types import Metrics


class StageProgress:
    """A rich progress display per cycle stage; silent (but counting) when not a terminal.
    Entered, it is a ``spade_train.resources.Progress``; the display starts with the first
    stage (so what is said before it, loading the policy or seeding the pool, comes first)."""

    def __init__(self, enabled: bool = True) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
            disable=not enabled,
        )
        self._shown = False

    def __enter__(self) -> StageProgress:
        self._shown = False
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._shown:
            self._progress.__exit__(kind, exc, tb)

    def add_task(self, description: str, *, total: float | None = None) -> int:
        if not self._shown:
            self._progress.__enter__()
            self._shown = True
        return int(self._progress.add_task(description, total=total))

    def update(self, task: int, *, completed: float | None = None) -> None:
        self._progress.update(TaskID(task), completed=completed)


class StepProgress:
    """Progress of one long step (the cold start's warm-up, ...), always on stderr so stdout
    stays the command's result: a rich bar on a terminal; elsewhere (a log file, CI) a plain
    line at the start, at most every ``every_s`` seconds, and at the end."""

    def __init__(
        self,
        description: str,
        total: int,
        enabled: bool = True,
        every_s: float = 15.0,
        stream: TextIO | None = None,
    ) -> None:
        self.description, self.total, self.done = description, total, 0
        self.enabled, self.every_s = enabled, every_s
        self.stream = stream or sys.stderr
        self.started = self._said = time.monotonic()
        self.note = ""
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> StepProgress:
        if not self.enabled:
            return self
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total)
        else:
            self._say()
        return self

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self.note = note
        if not self.enabled:
            return
        if self._bar is not None:
            text = f"{self.description} ({note})" if note else self.description
            self._bar.update(self._task, advance=n, description=text)
        elif time.monotonic() - self._said >= self.every_s or self.done == self.total:
            self._say()

    def _say(self) -> None:
        self._said = time.monotonic()
        elapsed = self._said - self.started
        note = f", {self.note}" if self.note else ""
        print(
            f"{self.description}: {self.done}/{self.total}{note}, {elapsed:.0f} s",
            file=self.stream,
            flush=True,
        )

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def summary_line(row: Metrics) -> str:
    def f(v: object) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    return (
        f"cycle {row['cycle']}: valid {f(row.get('design/valid'))}/"
        f"{f(row.get('design/completions'))}  return hint {f(row.get('play/return_hint'))} "
        f"nohint {f(row.get('play/return_nohint'))}  regret {f(row.get('reward/regret_mean'))}  "
        f"loss {f(row.get('train/loss'))}  pool {row.get('pool/size')}  "
        f"{f(row.get('time/cycle_s'))} s"
    )
