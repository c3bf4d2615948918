"""Value-preserving regrouping of MXFP8 scales: one exponent per ``group`` elements where exact.

An MXFP8 row stores ``x[k] = code[k] · 2^(e[k/32] - 127)``. The same values can often be
written with *one* exponent per larger group of ``G = 32·c`` elements: take the largest block
exponent of the group, ``E = max_j e_j``, and shift every code of block j down by
``d_j = E - e_j`` binades. The product ``code · 2^e`` is unchanged whenever the shifted code
is itself representable, which is a pure bit question on the code (E4M3 ``s.eeee.mmm`` bias 7,
E5M2 ``s.eeeee.mm`` bias 15; ``MB`` mantissa bits)::

    exponent field f > d:   code - (d << MB)                  (still normal: always exact)
    f <= d (goes subnormal): significand sig = f ? 2^MB + m : m, shifted right by
                            sh = f ? d - f + 1 : d; exact iff the sh bits shifted out are 0

A zero stays zero; a NaN/Inf code can only stay where it is (``d = 0``). If any code of a
row's group would lose a bit, or a block holds the NaN scale byte 0xFF, that row's group is
left exactly as it was; otherwise every block of the group gets the byte ``E`` and the shifted
codes. Either way the tensor dequantizes to the same values bit for bit, so every consumer
(the reference GEMM included) computes the same result from it.

Why: a GEMM on FP8 tensor cores must scale each 32-wide K chunk's partial product separately
(``kernels/gemm_mxfp8.py``), unless all rows of its A tile and B tile share one exponent across
a K step. Random Gaussian data regroups for ~99.9% of (row, 128) groups (~90-95% of 64-128-row
tiles), so a pass over each operand (memory-bound) turns most K steps into the cheap path.
Outlier channels (a block 5+ binades above its neighbours) regroup far less often.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..tensor import QFormat, QuantizedTensor

__all__ = ["MANTISSA_BITS", "regroup_mx_reference", "shift_codes_down"]

MANTISSA_BITS = {QFormat.MXFP8_E4M3: 3, QFormat.MXFP8_E5M2: 2}


def _is_special(mag: torch.Tensor, mb: int) -> torch.Tensor:
    """E4M3 NaN (0x7F) or E5M2 Inf/NaN (exponent field all ones)."""
    if mb == 3:
        return mag == 0x7F
    return (mag >> 2) == 0x1F


def shift_codes_down(codes: torch.Tensor, d: torch.Tensor, mb: int):
    """``(codes · 2^-d as codes, exact?)`` for uint8 FP8 codes and shifts ``d >= 0`` (int32)."""
    c = codes.to(torch.int32)
    sign, mag = c & 0x80, c & 0x7F
    f, m = mag >> mb, mag & ((1 << mb) - 1)
    stays_normal = f > d
    sig = torch.where(f > 0, m | (1 << mb), m)
    sh = torch.where(f > 0, d - f + 1, d).clamp(0, 15)
    lost = sig & ((1 << sh) - 1)
    shifted = torch.where(stays_normal, c - (d << mb), sign | (sig >> sh))
    exact = (stays_normal | (lost == 0)) & ((d == 0) | ~_is_special(mag, mb))
    shifted = torch.where(d == 0, c, shifted)
    return shifted.to(torch.uint8), exact


def regroup_mx_reference(q: QuantizedTensor, group: int = 128) -> QuantizedTensor:
    """``q`` (MXFP8, 1×32) with one exponent per ``group`` elements per row wherever exact.

    K must be a multiple of ``group`` (a multiple of 32). Returns a new QuantizedTensor with
    the same format, block and values; only the codes and scale bytes of regrouped row
    groups change.
    """
    if q.fmt not in MANTISSA_BITS or q.block != (1, 32):
        raise ValueError(f"regroup_mx: needs an MXFP8 1x32 tensor, got {q.fmt.value} {q.block}")
    if group % 32 or q.cols % group:
        raise ValueError(f"regroup_mx: group {group} must be a multiple of 32 dividing K={q.cols}")
    mb, c = MANTISSA_BITS[q.fmt], group // 32
    rows, k = q.rows, q.cols
    codes = q.data.view(torch.uint8).reshape(rows, k // group, c, 32)
    e = q.scale.to(torch.int32).reshape(rows, k // group, c)
    e_max = e.amax(-1, keepdim=True)
    d = (e_max - e)[..., None].expand(-1, -1, -1, 32)
    shifted, exact = shift_codes_down(codes, d, mb)
    ok = exact.flatten(2).all(-1) & (e != 255).all(-1)                 # per (row, group)
    new_codes = torch.where(ok[..., None, None], shifted, codes)
    new_e = torch.where(ok[..., None], e_max.expand(-1, -1, c), e)
    data = new_codes.reshape(rows, k).view(q.data.dtype)
    return replace(q, data=data, scale=new_e.reshape(rows, k // 32).to(torch.uint8))
