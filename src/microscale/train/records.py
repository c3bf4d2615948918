"""What the training loop logs: the window of steps since the last record, the JSONL file on
resume, and the progress display (a tqdm bar on a terminal, else a log line every ~10%)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoint import atomic_write_text

if TYPE_CHECKING:
    from .trainer import TrainConfig

__all__ = ["Window", "truncate_metrics", "progress_bar", "report_progress"]

log = logging.getLogger("microscale.train.trainer")


class Window:
    """Losses, tokens and seconds since the last logged record."""

    def __init__(self):
        self.losses, self.tokens, self.seconds, self.last_dt = [], 0, 0.0, 0.0

    def add(self, loss: float, tokens: int, dt: float) -> None:
        self.losses.append(loss)
        self.tokens += tokens
        self.seconds += dt
        self.last_dt = dt

    @property
    def mean_loss(self) -> float:
        return sum(self.losses) / len(self.losses)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop records past the checkpoint's step (written before a crash, redone after resume)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))


def progress_bar(cfg: TrainConfig, start: int):
    show = sys.stderr.isatty() if cfg.progress is None else cfg.progress
    if not show:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=cfg.steps, initial=start, desc=cfg.recipe, dynamic_ncols=True, leave=True)


def report_progress(bar, record: dict, cfg: TrainConfig) -> None:
    """Progress: the tqdm postfix on a TTY, else a log line about every 10% of the run."""
    text = {"loss": f"{record['loss']:.4f}", "tok/s": f"{record['tok_per_s']:,.0f}"}
    if "val_loss" in record:
        text["val"] = f"{record['val_loss']:.4f}"
    if bar is not None:
        bar.set_postfix(text, refresh=False)
    elif record["step"] % max(1, cfg.steps // 10) == 0 or record["step"] == cfg.steps or "val_loss" in record:
        log.info("[%s] step %d/%d  %s", cfg.recipe, record["step"], cfg.steps,
                 "  ".join(f"{k} {v}" for k, v in text.items()))
