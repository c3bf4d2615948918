"""The harness's run configuration: :class:`TrainConfig`, its checks, and the LR schedule.

Every field is a plain value (a run's ``config.json`` is ``dataclasses.asdict`` of it);
``__post_init__`` refuses combinations that cannot run, with the reason. ``_RESUME_FIXED``
lists the fields a resumed run must share with its checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .speed import COMPILE_MODES

__all__ = ["TrainConfig", "DivergenceError", "lr_at", "keep_hp_arg"]

# config fields a resumed run must share with the checkpoint (others, e.g. --steps, may change)
_RESUME_FIXED = ("model", "mlp", "recipe", "backend", "keep_hp", "seed", "batch_size", "seq_len",
                 "data", "max_bytes", "data_seed", "order")


@dataclass
class TrainConfig:
    """Everything a run depends on (the CLI flags); saved to ``<out>/config.json``."""

    recipe: str = "bf16"
    model: str = "tiny"
    mlp: str | None = None
    steps: int = 300
    batch_size: int = 8
    seq_len: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    lr_schedule: str = "cosine"
    warmup: int | None = None
    decay_frac: float = 0.2
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    switch_step: int | None = None
    switch_mode: str = "fprop"
    keep_hp: str | None = None
    backend: str | None = None
    seed: int = 0
    data_seed: int | None = None     # data order and validation set; None = seed
    order: str = "random"            # "epoch": no token trained on twice (see data.BatchSampler)
    device: str | None = None
    threads: int | None = None
    data: str | None = None
    max_bytes: int | None = None
    cache_dir: str | None = None
    out: str = "runs/train"
    eval_every: int = 50
    eval_batches: int = 8
    log_every: int = 1
    ckpt_every: int = 100
    resume: bool = False
    progress: bool | None = None
    compile: str = "auto"
    compile_mode: str = "default"
    cuda_graph: bool = False
    check_compile: bool = False        # compiled vs eager gradients at the start and a switch
    grad_accum: int = 1                # micro-batches per step (weights quantized once a step)
    recompute_input: bool | None = None  # MLP down projections recompute their input's wgrad
    #                                      view; None: ms.Linear's default (nn.recompute)
    dist: str = "none"                 # "ddp" / "fsdp" under torchrun: see train/distributed.py
    all_gather: str = "auto"           # FSDP2 weight all-gather: "auto", "quantized" or "fp32"
    stop_after_s: float | None = None   # this call's wall budget: then checkpoint and return

    def __post_init__(self):
        positive = ("steps", "batch_size", "seq_len", "eval_every", "eval_batches", "log_every",
                    "grad_accum")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr_schedule not in ("cosine", "wsd"):
            raise ValueError(f"lr_schedule must be 'cosine' or 'wsd', got {self.lr_schedule!r}")
        if not 0.0 <= self.decay_frac <= 1.0 or not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError("decay_frac and min_lr_ratio must be in [0, 1]")
        if self.compile not in ("auto", "on", "off"):
            raise ValueError(f"compile must be 'auto', 'on' or 'off', got {self.compile!r}")
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode must be one of {COMPILE_MODES}, got {self.compile_mode!r}")
        if self.cuda_graph and "reduce-overhead" in self.compile_mode:
            raise ValueError("cuda_graph captures the step itself; do not combine it with "
                             "compile_mode='reduce-overhead' (which captures each block)")
        if self.grad_accum > 1 and (self.cuda_graph or self.batch_size % self.grad_accum):
            raise ValueError(f"grad_accum={self.grad_accum} must divide batch_size "
                             f"({self.batch_size}) and cannot be combined with cuda_graph "
                             "(which captures one forward + backward)")
        if self.dist not in ("none", "ddp", "fsdp") or \
                self.all_gather not in ("auto", "quantized", "fp32"):
            raise ValueError(f"dist must be none/ddp/fsdp and all_gather auto/quantized/fp32, "
                             f"got {self.dist!r}, {self.all_gather!r}")
        if self.check_compile and self.dist == "fsdp":
            raise ValueError("check_compile compares gradients of the unsharded model; use it "
                             "with dist 'none' or 'ddp'")
        if self.switch_mode not in ("fprop", "all"):
            raise ValueError(f"switch_mode must be 'fprop' or 'all', got {self.switch_mode!r}")
        if self.lr <= 0 or self.ckpt_every < 0 or self.seed < 0 or (self.threads or 0) < 0 \
                or (self.data_seed or 0) < 0:
            raise ValueError("lr must be > 0; ckpt_every, seed, data_seed and threads >= 0")
        if self.warmup is None:
            self.warmup = max(1, self.steps // 20)

    @property
    def sampler_seed(self) -> int:
        """The seed of the data order: ``data_seed``, else ``seed``."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def decay_start(self) -> int:
        """First step of the WSD decay phase (the paper switches precision about here)."""
        return self.steps - int(round(self.decay_frac * self.steps))


class DivergenceError(RuntimeError):
    """The loss (or gradient norm) went NaN/Inf; carries the step and the last good checkpoint."""

    def __init__(self, what: str, value: float, step: int, checkpoint: Path | None):
        self.step, self.checkpoint = step, checkpoint
        where = (f"last good checkpoint: {checkpoint} (continue with --resume, e.g. at a lower --lr)"
                 if checkpoint else "no checkpoint was written before it")
        super().__init__(f"{what} is {value} at step {step}; training stopped. {where}")


def lr_at(step: int, cfg: TrainConfig) -> float:
    """LR for 0-based update ``step``: linear warmup, then cosine or WSD down to min_lr_ratio·lr."""
    lo = cfg.lr * cfg.min_lr_ratio
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if cfg.lr_schedule == "cosine":
        frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return lo + 0.5 * (cfg.lr - lo) * (1.0 + math.cos(math.pi * min(frac, 1.0)))
    start = max(cfg.decay_start, cfg.warmup)
    if step < start:
        return cfg.lr
    return cfg.lr - (cfg.lr - lo) * (step - start + 1) / max(1, cfg.steps - start)


def keep_hp_arg(spec: str | None):
    """``--keep-hp`` text -> ``convert(keep_high_precision=...)``: None (the recipe's default),
    ``[]`` for ``none``, a list for comma-separated rules (``first:2,last:8``), else the string."""
    if spec is None:
        return None
    if spec.strip().lower() == "none":
        return []
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    return parts if len(parts) > 1 else parts[0]
