"""``ms.scaled_mm``: ``y = A Bᵀ`` for two quantized operands, both quantized along K.

Reference semantics (SPEC §6 for NVFP4, the same shape for every other format)::

    y[m, n] = f · Σ_k (value(a_mk) · sa[m, k]) · (value(b_nk) · sb[n, k])

``sa``/``sb`` are the *block* scales (E4M3 for NVFP4, 2^k for MX, fp32 scale_inv for FP8) and
``f`` the per-tensor factor, applied once in the epilogue: for NVFP4 × NVFP4 it is
``α = amax_a · amax_b / 7225344``; for FP8 and MX it is 1 (their scales are all per block;
tensorwise FP8 is a single block). Products and sums in fp32. Because every
``value · block_scale`` of NVFP4/MX is exact in bf16, a bf16 tensor-core GEMM with fp32
accumulation on those partially dequantized operands, times ``f``, is an exact emulation up
to summation order — which is how the kernels do it on Hopper.

Any two formats may be mixed (e.g. FP8 1×128 activations × FP8 128×128 weights, or MXFP8
E4M3 × E5M2), as long as both operands have the same K and the same RHT (a rotated operand
is only meaningful against an equally rotated one).
"""

from __future__ import annotations

import torch

from .quant.nvfp4 import nvfp4_alpha
from .tensor import QFormat, QuantizedTensor
from .validate import check_backend, check_float_dtype

__all__ = ["scaled_mm", "scaled_mm_reference", "gemm_factor"]


def _check_operands(qa: QuantizedTensor, qb: QuantizedTensor) -> None:
    for name, q in (("qa", qa), ("qb", qb)):
        if not isinstance(q, QuantizedTensor):
            raise TypeError(f"scaled_mm: {name} must be a QuantizedTensor, got {type(q).__name__}")
    if len(qb.shape) != 2:
        raise ValueError(f"scaled_mm: B must be 2-D [N, K], got shape {tuple(qb.shape)}")
    if qa.cols != qb.cols:
        raise ValueError(f"scaled_mm: reduction dims differ: A has K={qa.cols}, B has K={qb.cols}")
    if qa.rht_d != qb.rht_d:
        raise ValueError(f"scaled_mm: RHT mismatch (A rht_d={qa.rht_d}, B rht_d={qb.rht_d}); "
                         "rotate both operands or neither")
    if qa.device != qb.device:
        raise ValueError(f"scaled_mm: operands on different devices ({qa.device}, {qb.device})")


def gemm_factor(qa: QuantizedTensor, qb: QuantizedTensor) -> torch.Tensor:
    """The epilogue factor ``f`` (0-dim fp32)."""
    if qa.fmt == QFormat.NVFP4 and qb.fmt == QFormat.NVFP4:
        return nvfp4_alpha(qa.amax, qb.amax)
    return qa.tensor_scale() * qb.tensor_scale()


def scaled_mm_reference(qa: QuantizedTensor, qb: QuantizedTensor,
                        out_dtype: torch.dtype = torch.float32,
                        apply_factor: bool = True) -> torch.Tensor:
    """fp32 reference: partially dequantize both operands, one fp32 GEMM, factor, cast.

    ``apply_factor=False`` leaves ``f`` to the caller (who then multiplies the fp32 result by
    :func:`gemm_factor` and casts, which is this function's arithmetic in the same order).
    """
    _check_operands(qa, qb)
    pa, pb = qa.block_values(), qb.block_values()
    y = pa @ pb.t()
    if apply_factor:
        y = y * gemm_factor(qa, qb)
    return y.reshape(*qa.shape[:-1], qb.shape[0]).to(out_dtype)


def scaled_mm(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype = torch.float32,
              backend: str = "auto") -> torch.Tensor:
    """``A @ B.T`` for quantized ``A [..., K]`` and ``B [N, K]``; result ``[..., N]``."""
    _check_operands(qa, qb)
    check_float_dtype(out_dtype, "out_dtype", allowed=(torch.float32, torch.bfloat16, torch.float16))
    check_backend(backend)
    from .ops import mm     # the microscale::scaled_mm op, which dispatches as above
    return mm(qa, qb, out_dtype, backend)
