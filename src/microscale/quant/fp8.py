"""FP8 reference quantizers: blockwise (DeepSeek-V3), tensorwise current and delayed scaling.

All three use the same scale rule (SPEC §8) on a different region R (a 1×128 block, a
128×128 tile, or the whole tensor)::

    amax_R = max|x| over R
    scale  = fp8_max / amax_R       (fp32; amax_R = 0 → 1; scale = inf → the input dtype's max;
                                     amax_R = Inf, with check_finite=False only → 1)
    scale  = 2^floor(log2 scale)    if pow2_scales
    data   = cast_rne_satfinite(x · scale)          stored with scale_inv = 1 / scale

Blockwise layouts (E4M3): 1×128 keeps fp32 ``scale_inv[rows, cols/128]``; 128×128 keeps
``scale_inv[rows/128, cols/128]``. The 1×128 transpose must be re-quantized from the
high-precision source (the blocks run the other way); the 128×128 transpose is the transposed
data and scales (``QuantizedTensor.t()``).

Delayed scaling keeps a window of past amaxes (:class:`DelayedScaling`): the scale used now
comes from the history, and the current amax is recorded for the next call, as TE does.
"""

from __future__ import annotations

import torch

from ..formats import fp8_cast_satfinite
from ..tensor import QFormat, QuantizedTensor
from ..validate import FP8_BLOCKS, check_fp8_dtype, check_int
from .common import (NAN_BYTE_FP8, as_rows, check_given_scalar, check_input, exp2_int,
                     floor_log2, mark_nan, split_nan)

__all__ = ["fp8_scale_from_amax", "quantize_fp8_block", "quantize_fp8_tensor", "DelayedScaling",
           "delayed_scale_update_", "FP8_MAX", "MAX_MARGIN"]

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# Delayed-scaling margin: scale / 2^margin. 2^64 below fp8_max / amax already flushes any
# realistic tensor to zero; a larger margin is a mistake (and 2.0 ** 10**6 overflows Python).
MAX_MARGIN = 64


def _fp8_max(fp8_dtype: torch.dtype) -> float:
    return FP8_MAX[check_fp8_dtype(fp8_dtype)]


def fp8_scale_from_amax(amax: torch.Tensor, fp8_dtype: torch.dtype, pow2_scales: bool,
                        in_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """fp32 scale (not its inverse) from fp32 amax, elementwise, per the rule above."""
    amax = amax.float()
    scale = torch.full_like(amax, _fp8_max(fp8_dtype)) / amax  # one IEEE division, not 1/amax·max
    scale = torch.where(amax == 0, torch.ones_like(scale), scale)
    scale = torch.where(torch.isinf(scale), torch.full_like(scale, torch.finfo(in_dtype).max), scale)
    scale = torch.where(torch.isinf(amax), torch.ones_like(scale), scale)   # Inf: unit scale
    if pow2_scales:
        scale = exp2_int(floor_log2(scale))
    return scale


def quantize_fp8_block(x: torch.Tensor, block: tuple[int, int] = (1, 128), pow2_scales: bool = True,
                       fp8_dtype: torch.dtype = torch.float8_e4m3fn, check_finite: bool = True
                       ) -> QuantizedTensor:
    """Blockwise FP8: one scale per ``block`` = (1, 128) or (128, 128) region."""
    block = tuple(block)
    if block not in FP8_BLOCKS:
        raise ValueError(f"fp8_block supports block=(1, 128) or (128, 128), got {block}")
    br, bc = block
    x_hp, nan = split_nan(as_rows(check_input(x, "fp8_block", bc, br, check_finite)).float(),
                          check_finite)
    rows, cols = x_hp.shape
    vmax = x_hp.abs().reshape(rows // br, br, cols // bc, bc).amax(dim=(1, 3))
    scale = fp8_scale_from_amax(vmax, fp8_dtype, pow2_scales, x.dtype)
    full = scale.repeat_interleave(br, dim=0).repeat_interleave(bc, dim=1)
    data = mark_nan(fp8_cast_satfinite(x_hp * full, fp8_dtype), nan, NAN_BYTE_FP8)
    return QuantizedTensor(
        fmt=QFormat.FP8_BLOCK, data=data, scale=1.0 / scale, amax=x_hp.abs().amax(),
        shape=x.shape, orig_dtype=x.dtype, block=block, extra={"pow2_scales": pow2_scales},
    )


def quantize_fp8_tensor(x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn,
                        pow2_scales: bool = False, scale: torch.Tensor | None = None,
                        check_finite: bool = True, amax: torch.Tensor | None = None
                        ) -> QuantizedTensor:
    """Tensorwise FP8 with current scaling, or with a given fp32 ``scale`` (delayed scaling).

    ``amax``: current scaling from this fp32 amax instead of measuring it (an amax agreed over
    ranks, or taken by the caller's compiled graph); the scale rule is applied here, as for a
    measured one, and the result carries the given amax. Give ``scale`` or ``amax``, not both.
    """
    x_hp, nan = split_nan(as_rows(check_input(x, "fp8_tensor", 1, 1, check_finite)).float(),
                          check_finite)
    check_given_scalar(scale, "scale", "fp8_tensor", check_finite)
    check_given_scalar(amax, "amax", "fp8_tensor", check_finite)
    if scale is not None and amax is not None:
        raise ValueError("fp8_tensor: give a scale (delayed scaling) or an amax, not both")
    amax = x_hp.abs().amax() if amax is None else amax.float().reshape(()).to(x_hp.device)
    if scale is None:
        scale = fp8_scale_from_amax(amax, fp8_dtype, pow2_scales, x.dtype)
    scale = scale.float().reshape(()).to(x_hp.device)
    data = mark_nan(fp8_cast_satfinite(x_hp * scale, fp8_dtype), nan, NAN_BYTE_FP8)
    return QuantizedTensor(
        fmt=QFormat.FP8_TENSOR, data=data, scale=1.0 / scale, amax=amax, shape=x.shape,
        orig_dtype=x.dtype, block=(x_hp.shape[0], x_hp.shape[1]),
        extra={"pow2_scales": pow2_scales},
    )


def delayed_scale_update_(amax_history: torch.Tensor, scale: torch.Tensor, amax: torch.Tensor,
                          fp8_max: float, margin: int) -> None:
    """In place: push ``amax`` into the window, ``scale = fp8_max / max(window) / 2^margin``,
    kept when that max is <= 0 or non-finite or the new scale underflows to 0. Device-side
    only (no host sync); the layers run it as the ``microscale::delayed_scaling_update_`` op
    so that it traces under compile."""
    amax_history.copy_(torch.roll(amax_history, 1))
    amax_history[0] = amax.float().reshape(())
    hist_amax = amax_history.amax()
    # tensor / tensor: one IEEE division (a Python numerator would run as reciprocal * max)
    new = torch.full_like(hist_amax, fp8_max) / hist_amax / (2.0 ** margin)
    ok = (hist_amax > 0) & torch.isfinite(hist_amax) & torch.isfinite(new) & (new > 0)
    scale.copy_(torch.where(ok, new, scale))


class DelayedScaling:
    """Amax history for FP8 delayed scaling (one object per tensor role, e.g. a layer's x).

    ``scale = fp8_max / max(history) / 2^margin``; the history holds the last ``history_len``
    amaxes. The scale is kept when the history's amax is ≤ 0 or non-finite. Call
    :meth:`quantize` each step: it quantizes with the current scale, then records the amax
    and updates the scale for the next step. ``state_dict``/``load_state_dict`` save it.
    """

    def __init__(self, fp8_dtype: torch.dtype = torch.float8_e4m3fn, history_len: int = 1024,
                 margin: int = 0, device: torch.device | str | None = None):
        check_int(history_len, "history_len", 1)
        check_int(margin, "margin", 0, MAX_MARGIN)
        self.fp8_max = _fp8_max(fp8_dtype)
        self.fp8_dtype, self.history_len, self.margin = fp8_dtype, history_len, margin
        self.amax_history = torch.zeros(history_len, dtype=torch.float32, device=device)
        self.scale = torch.ones((), dtype=torch.float32, device=device)
        self.steps = 0

    def update(self, amax: torch.Tensor) -> None:
        """Record one amax and recompute the scale from the window."""
        self.amax_history = self.amax_history.to(amax.device)
        self.scale = self.scale.to(amax.device)
        delayed_scale_update_(self.amax_history, self.scale, amax, self.fp8_max, self.margin)
        self.steps += 1

    def quantize(self, x: torch.Tensor, check_finite: bool = True) -> QuantizedTensor:
        q = quantize_fp8_tensor(x, self.fp8_dtype, scale=self.scale.to(x.device),
                                check_finite=check_finite)
        self.update(q.amax)
        return q

    def state_dict(self) -> dict:
        return {"amax_history": self.amax_history.clone(), "scale": self.scale.clone(),
                "steps": self.steps, "margin": self.margin, "history_len": self.history_len}

    def load_state_dict(self, state: dict) -> None:
        if state["amax_history"].numel() != self.history_len:
            raise ValueError(f"history length mismatch: saved {state['amax_history'].numel()}, "
                             f"this object {self.history_len}")
        self.amax_history = state["amax_history"].float().clone()
        self.scale = state["scale"].float().clone()
        self.steps = int(state["steps"])
        self.margin = check_int(int(state["margin"]), "margin", 0, MAX_MARGIN)
