"""The training harness: models, data, the loop, checkpoints, plots and the ``microscale`` CLI.

    from microscale.train import Trainer, TrainConfig
    Trainer(TrainConfig(recipe="nvfp4", model="tiny", steps=300, out="runs/nvfp4")).fit()

``microscale compare`` (see :mod:`microscale.train.cli` and ``docs/harness.md``) runs several
recipes from the same seed and data order and plots the relative loss gap to bf16.

Names load on first use, so ``microscale --help`` works on a base install (checkpoints need
``safetensors``, progress bars ``tqdm`` and plots ``matplotlib``: ``pip install microscale[train]``).
"""

from __future__ import annotations

import importlib

# name -> module that defines it (imported on first attribute access)
_LAZY = {
    "Trainer": "trainer", "TrainConfig": "trainer", "DivergenceError": "trainer", "lr_at": "trainer",
    "keep_hp_arg": "trainer", "ModelConfig": "model", "MODEL_CONFIGS": "model", "Transformer": "model",
    "build_model": "model", "TokenData": "data", "BatchSampler": "data", "load_data": "data",
    "stdlib_corpus": "data", "save_checkpoint": "checkpoint", "load_checkpoint": "checkpoint",
    "latest_checkpoint": "checkpoint",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
