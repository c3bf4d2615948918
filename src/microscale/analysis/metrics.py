"""Error metrics of one quantized operand or one quantized GEMM output (definitions below).

For an operand ``op`` (fp32 ``[rows, K]``, in the domain the quantizer saw, i.e. after the RHT)
and its quantized form ``q`` with decoded values ``q̂``, element scales ``s`` (block scale ×
tensor scale, expanded to ``[rows, K]``) and element max ``E`` (6, 448 or 57344)::

    rel_err          ||q̂ - op|| / ||op||
    sqnr_db          20·log10(||op|| / ||op - q̂||)            (+inf when q̂ == op)
    flush_frac       #{op_i != 0 and q̂_i == 0} / #{op_i != 0}
    sat_frac         #{|op_i| > E · s_i · (1 + 1e-6), s_i > 0} / numel   (clipped by the element
                     format; an element whose scale underflowed to 0 counts as flushed instead)
    amax             max|op|
    scale_*          min / median / max of the decoded scale of each block (or 2D tile) that
                     holds a nonzero value; scale_zero_frac: the fraction of those blocks whose
                     scale decodes to 0 (underflow, the whole block is flushed)

The 1e-6 slack keeps fp32 round-off at exactly ``E · s`` from counting as saturation; a real
clip (an NVFP4 block max whose E4M3 scale rounded down) exceeds ``E · s`` by up to 1/16.
All sums are in float64 so a 10⁷-element tensor's norm does not lose digits.
"""

from __future__ import annotations

import math

import torch

from ..tensor import QFormat, QuantizedTensor

__all__ = ["operand_metrics", "output_metrics", "element_max", "sqnr_db"]

_ELEM_MAX = {QFormat.NVFP4: 6.0, QFormat.MXFP4: 6.0, QFormat.MXFP8_E4M3: 448.0,
             QFormat.MXFP8_E5M2: 57344.0}
_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
_SAT_SLACK = 1.0 + 1e-6


def element_max(q: QuantizedTensor) -> float:
    """Largest element magnitude the format of ``q`` can store (before scales)."""
    if q.fmt in _ELEM_MAX:
        return _ELEM_MAX[q.fmt]
    return _FP8_MAX[q.data.dtype]


def sqnr_db(signal_norm: float, noise_norm: float) -> float:
    """``20·log10(signal / noise)``; +inf for zero noise, -inf for a zero signal."""
    if noise_norm == 0:
        return math.inf
    if signal_norm == 0:
        return -math.inf
    return 20.0 * math.log10(signal_norm / noise_norm)


def _norms(ref: torch.Tensor, approx: torch.Tensor) -> tuple[float, float]:
    ref64 = ref.double()
    return float(ref64.norm()), float((approx.double() - ref64).norm())


def output_metrics(ref: torch.Tensor, approx: torch.Tensor) -> dict:
    """``rel_err`` and ``sqnr_db`` of a GEMM output against its fp32 reference."""
    sig, noise = _norms(ref, approx)
    return {"rel_err": noise / sig if sig else (0.0 if noise == 0 else math.inf),
            "sqnr_db": sqnr_db(sig, noise)}


def _per_block(t: torch.Tensor, block: tuple[int, int], reduce: str) -> torch.Tensor:
    """Reduce an expanded ``[rows, cols]`` tensor to one value per (br × bc) block."""
    rows, cols = t.shape
    br, bc = block
    tiles = t.reshape(rows // br, br, cols // bc, bc)
    return tiles.amax(dim=(1, 3)) if reduce == "max" else tiles[:, 0, :, 0]


def operand_metrics(op: torch.Tensor, q: QuantizedTensor) -> dict:
    """All operand metrics of the module docstring, as Python floats."""
    op = op.reshape(-1, op.shape[-1]).float()
    q_hat = q.dequantize(torch.float32, undo_rht=False).reshape(op.shape)
    out = output_metrics(op, q_hat)
    nonzero = op != 0
    n_nonzero = int(nonzero.sum())
    out["flush_frac"] = float((nonzero & (q_hat == 0)).sum()) / n_nonzero if n_nonzero else 0.0
    scales = q.block_scales() * q.tensor_scale()               # decoded, expanded [rows, K]
    clipped = (op.abs() > element_max(q) * scales * _SAT_SLACK) & (scales > 0)
    out["sat_frac"] = float(clipped.sum()) / op.numel()
    out["amax"] = float(op.abs().amax())
    out.update(_scale_stats(op, scales, q.block))
    return out


def _scale_stats(op: torch.Tensor, scales: torch.Tensor, block: tuple[int, int]) -> dict:
    block_vmax = _per_block(op.abs(), block, "max")
    block_scale = _per_block(scales, block, "first")[block_vmax > 0]
    if block_scale.numel() == 0:
        return {"scale_min": 0.0, "scale_median": 0.0, "scale_max": 0.0, "scale_zero_frac": 0.0}
    return {"scale_min": float(block_scale.min()), "scale_median": float(block_scale.median()),
            "scale_max": float(block_scale.max()),
            "scale_zero_frac": float((block_scale == 0).sum()) / block_scale.numel()}
