"""Optional experiment loggers: Weights & Biases (``WANDB_API_KEY``, ``WANDB_ENTITY``) and
TensorBoard. Each gets the scalar metrics of every cycle; nested values are flattened."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spade_train.config import RunConfig


def _scalars(row: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(_scalars(value, name + "/"))
    return out


class WandbLogger:
    def __init__(self, cfg: RunConfig, run_dir: Path):
        if not os.environ.get("WANDB_API_KEY"):
            raise RuntimeError(
                "logging.wandb is on but WANDB_API_KEY is unset; export it or set logging.wandb=false"
            )
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "spade"),
            entity=os.environ.get("WANDB_ENTITY"),
            name=run_dir.name,
            dir=str(run_dir),
            config=cfg.model_dump(mode="json"),
            resume="allow",
        )

    def log(self, row: dict[str, Any], step: int) -> None:
        self.run.log(_scalars(row), step=step)

    def close(self) -> None:
        self.run.finish()


class TensorBoardLogger:
    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, row: dict[str, Any], step: int) -> None:
        for key, value in _scalars(row).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def open_loggers(cfg: RunConfig, run_dir: Path) -> list[WandbLogger | TensorBoardLogger]:
    """The loggers the config switches on."""
    loggers: list[WandbLogger | TensorBoardLogger] = []
    if cfg.logging.wandb:
        loggers.append(WandbLogger(cfg, run_dir))
    if cfg.logging.tensorboard:
        loggers.append(TensorBoardLogger(run_dir))
    return loggers
