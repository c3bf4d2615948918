"""The training harness: models, data, the loop, checkpoints, plots and the ``microscale`` CLI.

    from microscale.train import Trainer, TrainConfig
    Trainer(TrainConfig(recipe="nvfp4", model="tiny", steps=300, out="runs/nvfp4")).fit()

``microscale compare`` (see :mod:`microscale.train.cli` and ``docs/harness.md``) runs several
recipes from the same seed and data order and plots the relative loss gap to bf16.
"""

from __future__ import annotations

from .checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from .data import BatchSampler, TokenData, load_data, stdlib_corpus
from .model import MODEL_CONFIGS, ModelConfig, Transformer, build_model
from .trainer import DivergenceError, TrainConfig, Trainer, keep_hp_arg, lr_at

__all__ = ["Trainer", "TrainConfig", "DivergenceError", "lr_at", "keep_hp_arg", "ModelConfig", "MODEL_CONFIGS",
           "Transformer", "build_model", "TokenData", "BatchSampler", "load_data", "stdlib_corpus",
           "save_checkpoint", "load_checkpoint", "latest_checkpoint"]
