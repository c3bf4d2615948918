"""``QuantMonitor``: run ``ms.analyze`` every N training steps and log flat per-layer metrics.

The training harness calls ``monitor(step, model, batch)`` after each step and merges the
returned dict into that step's JSONL record. On every ``every``-th step the monitor analyzes
the batch and returns keys of the form::

    "<prefix>/<layer>/<key>/<metric>"      e.g. "q/blocks.3.mlp.up_proj/wgrad.x/sqnr_db"
    "<prefix>/<layer>/sensitivity"          when "sensitivity" is among ``metrics``

with ``key`` an operand (``fprop.x`` … ``wgrad.x``) or output (``fprop.y dgrad.dx wgrad.dw``)
of :mod:`microscale.analysis.analyze`; keys whose value is None (a GEMM kept in high
precision) or not finite are left out, so every logged value is a plain float. Other steps
return None.

Training is not disturbed: the analysis takes gradients with ``torch.autograd.grad`` on the
layer outputs (nothing is written to any ``.grad``), runs with the global RNG state forked and
restored (dropout and stochastic rounding draw nothing from the training stream), and by
default in eval mode, after which every module's own ``training`` flag is put back.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..recipe import Recipe
from .analyze import OPERANDS, OUTPUTS, analyze, compute_loss
from .report import AnalysisReport, metric_value

__all__ = ["QuantMonitor", "lm_loss", "lm_inputs"]

_ALL_KEYS = tuple(k for _, _, k in OPERANDS) + tuple(OUTPUTS.values())
_OPERAND_ONLY = {"flush_frac", "sat_frac", "amax", "scale_min", "scale_median", "scale_max",
                 "scale_zero_frac"}


class QuantMonitor:
    """Callable ``monitor(step, model, batch) -> dict | None`` for the training loop.

    Args:
        every: analyze on steps where ``step % every == 0``.
        recipe: recipe for plain ``nn.Linear`` layers (converted layers use their own).
        metrics: names among ``sqnr_db rel_err flush_frac sat_frac amax scale_min scale_median
            scale_max scale_zero_frac sensitivity``.
        keys: operand/output keys to log (default: all nine).
        loss_fn: as in :func:`microscale.analyze`, always called with the full batch.
        inputs: ``inputs(batch)`` gives what is passed to the model (default: the batch itself).
            With neither set and a batch of two integer tensors (the harness's ``(ids,
            targets)``), the monitor calls ``model(ids)`` and uses :func:`lm_loss`.
        eval_mode: analyze with the model in eval mode (no dropout noise); flags are restored.
    """

    def __init__(self, every: int = 100, recipe: Recipe | str | None = None,
                 metrics: tuple[str, ...] = ("sqnr_db",), keys: tuple[str, ...] | None = None,
                 loss_fn: Callable | None = None, inputs: Callable | None = None,
                 prefix: str = "q", eval_mode: bool = True, seed: int = 0):
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive int, got {every!r}")
        allowed = {"sqnr_db", "rel_err", "sensitivity"} | _OPERAND_ONLY
        bad = [m for m in metrics if m not in allowed]
        if bad or not metrics:
            raise ValueError(f"unknown metric(s) {bad}; choose from {sorted(allowed)}")
        keys = _ALL_KEYS if keys is None else tuple(keys)
        bad_keys = [k for k in keys if k not in _ALL_KEYS]
        if bad_keys:
            raise ValueError(f"unknown key(s) {bad_keys}; choose from {_ALL_KEYS}")
        self.every, self.metrics, self.keys = every, tuple(metrics), keys
        self.recipe = Recipe.from_name(recipe) if isinstance(recipe, str) else recipe
        self.loss_fn, self.inputs, self.prefix = loss_fn, inputs, prefix
        self.eval_mode, self.seed = eval_mode, seed
        self.last_report: AnalysisReport | None = None

    @classmethod
    def for_lm(cls, every: int = 100, recipe: Recipe | str | None = None, **kwargs) -> "QuantMonitor":
        """For the harness convention: ``batch = (ids, targets)``, ``model(ids) -> logits``,
        loss = next-token cross-entropy (see :func:`lm_loss`)."""
        return cls(every, recipe, loss_fn=lm_loss, inputs=lm_inputs, **kwargs)

    def __call__(self, step: int, model: nn.Module, batch) -> dict | None:
        if step % self.every:
            return None
        report = self.analyze(model, batch)
        self.last_report = report
        return self.flatten(report)

    def analyze(self, model: nn.Module, batch) -> AnalysisReport:
        """Run the analysis on ``batch`` without touching the model's state."""
        modes = {m: m.training for m in model.modules()}
        inputs, user_loss = self.inputs, self.loss_fn
        if inputs is None and user_loss is None and _is_lm_batch(batch):
            inputs, user_loss = lm_inputs, lm_loss          # the harness's (ids, targets)
        model_in = inputs(batch) if inputs is not None else batch
        loss_fn = None
        if user_loss is not None:      # always hand the *full* batch (targets) to the loss
            loss_fn = lambda out, _model_in: compute_loss(user_loss, out, batch)  # noqa: E731
        try:
            if self.eval_mode:
                model.eval()
            return analyze(model, model_in, self.recipe, loss_fn, seed=self.seed)
        finally:
            for m, flag in modes.items():
                m.training = flag

    def flatten(self, report: AnalysisReport) -> dict:
        """The report as ``{"<prefix>/<layer>/<key>/<metric>": float}``."""
        out = {}
        for row in report.layers:
            base = f"{self.prefix}/{row['name']}"
            for metric in self.metrics:
                if metric == "sensitivity":
                    _put(out, f"{base}/sensitivity", metric_value(row, "sensitivity"))
                    continue
                for key in self.keys:
                    _put(out, f"{base}/{key}/{metric}", row[metric].get(key))
        return out


def _is_lm_batch(batch) -> bool:
    return (isinstance(batch, (tuple, list)) and len(batch) == 2
            and all(torch.is_tensor(t) and not t.is_floating_point() for t in batch))


def lm_inputs(batch):
    """``(ids, targets) -> ids``: what a language model is called with."""
    return batch[0]


def lm_loss(logits: torch.Tensor, batch) -> torch.Tensor:
    """Mean next-token cross-entropy of ``logits [B, T, V]`` against ``batch[1]`` ``[B, T]``."""
    return F.cross_entropy(logits.float().flatten(0, -2), batch[1].flatten())


def _put(out: dict, key: str, value) -> None:
    if value is not None and math.isfinite(value):
        out[key] = float(value)
