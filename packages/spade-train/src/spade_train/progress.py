"""What a run shows while it runs: a progress display per cycle stage and a one-line summary
of each finished cycle."""

from __future__ import annotations

from typing import Any


class StageProgress:
    """A rich progress display per cycle stage; silent (but counting) when not a terminal."""

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

    def __enter__(self) -> Any:
        self._progress.__enter__()
        return self._progress

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)


def summary_line(row: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    return (
        f"cycle {row['cycle']}: valid {f(row.get('design/valid'))}/"
        f"{f(row.get('design/completions'))}  return hint {f(row.get('play/return_hint'))} "
        f"nohint {f(row.get('play/return_nohint'))}  regret {f(row.get('reward/regret_mean'))}  "
        f"loss {f(row.get('train/loss'))}  pool {row.get('pool/size')}  "
        f"{f(row.get('time/cycle_s'))} s"
    )
