"""Precision switches for converted models: a step schedule and an evaluation context.

The NVFP4 paper (Appendix D) recovers most of the remaining loss gap by switching to higher
precision for the last stretch of training (from the start of learning-rate decay, ~18% of the
steps from the end). Two variants, both supported per :class:`~microscale.Linear`:

* ``mode="fprop"``: only the forward GEMM ``y = x Wᵀ`` runs in ``compute_dtype`` (bf16); dgrad
  and wgrad stay quantized (``layer.hp_fprop = True``). Most of the gain, most of the savings.
* ``mode="all"``: all three GEMMs in ``compute_dtype`` (``layer.high_precision = True``).

:class:`PrecisionSchedule` is stateless: ``apply(model, step)`` sets every ``ms.Linear`` from
the step alone (quantized before ``switch_step``, switched from it on), so resuming from a
checkpoint at any step gives the same precision. :func:`high_precision` is a context manager
for evaluation in high precision that restores each layer's previous switches on exit.
"""

from __future__ import annotations

import contextlib
import math

from torch import nn

from ..validate import check_int
from .linear import Linear

__all__ = ["PrecisionSchedule", "high_precision", "quantized_layers"]

_MODES = ("fprop", "all")


def quantized_layers(model: nn.Module) -> list[Linear]:
    """Every ``ms.Linear`` in ``model`` (the model itself included)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    from .experts import _GroupedBase     # grouped (MoE) layers have the same switches

    return [m for m in model.modules() if isinstance(m, (Linear, _GroupedBase))]


class PrecisionSchedule:
    """Switch converted layers to high precision from ``switch_step`` on.

    Args:
        switch_step: first step (0-based, as passed to :meth:`apply`) that runs in high
            precision. ``None`` never switches.
        mode: ``"fprop"`` (forward GEMM only) or ``"all"`` (every GEMM).
    """

    def __init__(self, switch_step: int | None, mode: str = "fprop"):
        if mode not in _MODES:
            raise ValueError(f"mode must be 'fprop' or 'all', got {mode!r}")
        if switch_step is not None:
            switch_step = check_int(switch_step, "switch_step", 0)
        self.switch_step, self.mode = switch_step, mode

    @classmethod
    def from_end(cls, total_steps: int, fraction: float = 0.18, mode: str = "fprop"
                 ) -> "PrecisionSchedule":
        """Switch for the last ``fraction`` of ``total_steps`` (paper: ~18%, the LR decay)."""
        if not 0.0 <= fraction <= 1.0 or total_steps < 1:
            raise ValueError(f"need total_steps >= 1 and fraction in [0, 1], got "
                             f"{total_steps}, {fraction}")
        return cls(total_steps - math.ceil(fraction * total_steps), mode)

    def active(self, step: int) -> bool:
        return self.switch_step is not None and step >= self.switch_step

    def apply(self, model: nn.Module, step: int) -> bool:
        """Set every ``ms.Linear`` in ``model`` for ``step``; returns whether the switch is on."""
        on = self.active(step)
        for layer in quantized_layers(model):
            layer.hp_fprop = on and self.mode == "fprop"
            layer.high_precision = on and self.mode == "all"
        return on

    def __repr__(self) -> str:
        return f"PrecisionSchedule(switch_step={self.switch_step}, mode={self.mode!r})"


@contextlib.contextmanager
def high_precision(model: nn.Module, enabled: bool = True):
    """Run every ``ms.Linear`` in ``model`` with all GEMMs in high precision inside the block.

    ``with ms.high_precision(model): evaluate(model)``. The previous ``high_precision`` and
    ``hp_fprop`` of each layer are restored on exit, also when the block raises.
    """
    layers = quantized_layers(model)
    saved = [(layer.high_precision, layer.hp_fprop) for layer in layers]
    try:
        if enabled:
            for layer in layers:
                layer.high_precision = True
        yield model
    finally:
        for layer, (hp, hp_fprop) in zip(layers, saved):
            layer.high_precision, layer.hp_fprop = hp, hp_fprop
