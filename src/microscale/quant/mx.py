"""OCP Microscaling (MX) reference quantizers: MXFP8 (E4M3, E5M2) and MXFP4 (E2M1), SPEC §7.

One power-of-two scale per block of 32 consecutive elements along the last dimension, stored
as a UE8M0 byte ``e`` meaning ``2^(e-127)``. No per-tensor scale. For a block with
``vmax = max|x_i|`` and element max ``elem_max`` (448, 57344, 6; emax 8, 15, 2):

* ``ceil`` mode (default; what TE and the NVFP4 paper train with): the smallest ``2^k`` with
  ``vmax / 2^k <= elem_max``, found exactly: with ``k0 = floor(log2 vmax) - emax`` the answer
  is ``k0`` or ``k0 + 1``, decided by comparing ``vmax`` with ``elem_max · 2^k0`` (no rounding).
  Nothing saturates.
* ``floor`` mode (OCP v1.0): ``k = floor(log2 vmax) - emax``; the top of the block may then
  exceed ``elem_max`` and saturates.

``vmax = 0`` stores byte 0; ``k`` is clamped to [-127, 127]; ``vmax = ±Inf`` (only with
``check_finite=False``) gets the unit scale ``k = 0`` and its Inf saturates to ±elem_max.
Elements are ``cast_rne_satfinite(x / 2^k)`` (division by a power of two is exact unless the
result is subnormal in fp32, where it rounds once like the hardware). A NaN (also only with
``check_finite=False``) is read as 0 and stored as the E4M3/E5M2 NaN byte 0x7F (MXFP8) or as
its block's scale byte 0xFF (MXFP4, whose elements have no NaN). MXFP4 codes are packed two per
byte like NVFP4. Memory: 8.25 bits per element for MXFP8, 4.25 for MXFP4.
"""

from __future__ import annotations

import torch

from ..formats import E2M1, E4M3, E5M2, ElemFormat, e2m1_encode, e2m1_stochastic_encode
from ..formats import e8m0_encode_exponent, fp8_cast_satfinite, pack_nibbles
from ..hadamard import rht as _rht
from ..tensor import QFormat, QuantizedTensor
from ..validate import SCALE_ROUNDINGS, check_scale_rounding
from .common import (NAN_BYTE_E8M0, NAN_BYTE_FP8, as_rows, check_input, exp2_int, floor_log2,
                     mark_nan, rand_bits_like, random_bytes, split_nan)

__all__ = ["quantize_mx", "mx_scale_exponent", "MX_BLOCK", "SCALE_ROUNDINGS"]

MX_BLOCK = 32
_MX_ELEM = {QFormat.MXFP8_E4M3: E4M3, QFormat.MXFP8_E5M2: E5M2, QFormat.MXFP4: E2M1}


def mx_scale_exponent(vmax: torch.Tensor, elem: ElemFormat, scale_rounding: str = "ceil"
                      ) -> torch.Tensor:
    """Unbiased block exponent ``k`` (int32, clamped to [-127, 127]) from fp32 block maxima."""
    check_scale_rounding(scale_rounding)
    vmax = vmax.float()
    pos = vmax > 0
    safe = torch.where(pos, vmax, torch.ones_like(vmax))
    k = floor_log2(safe) - elem.emax
    if scale_rounding == "ceil":
        # elem_max · 2^k in float64 is exact and never overflows for |k| <= 160.
        limit = elem.max * torch.ldexp(torch.ones_like(k, dtype=torch.float64), k)
        k = k + (safe.double() > limit).to(torch.int32)
    k = k.clamp(-127, 127)
    k = torch.where(torch.isinf(vmax), torch.zeros_like(k), k)   # Inf: the unit scale, 2^0
    return torch.where(pos, k, torch.full_like(k, -127))  # vmax = 0 → byte 0


def quantize_mx(
    x: torch.Tensor,
    fmt: str | QFormat = "mxfp8_e4m3",
    scale_rounding: str = "ceil",
    rht: bool = False,
    rht_d: int = 32,
    stochastic: bool = False,
    generator: torch.Generator | None = None,
    rand_bits: torch.Tensor | None = None,
    check_finite: bool = True,
    seed: torch.Tensor | None = None,
) -> QuantizedTensor:
    """Quantize ``x`` to an MX format along its last dimension (blocks of 32).

    ``rht``/``stochastic`` apply to MXFP4 only (the paper's NVFP4-style recipe on MXFP4:
    a 32×32 RHT on wgrad inputs and SR on gradients); SR follows SPEC §5 on the E2M1 grid.
    """
    fmt = QFormat.parse(fmt)
    if fmt not in _MX_ELEM:
        raise ValueError(f"quantize_mx handles mxfp8_e4m3, mxfp8_e5m2, mxfp4; got {fmt.value}")
    if stochastic and fmt != QFormat.MXFP4:
        raise ValueError("stochastic rounding is implemented for mxfp4 (E2M1) only")
    elem = _MX_ELEM[fmt]
    x2 = as_rows(check_input(x, fmt.value, MX_BLOCK, 1, check_finite))
    if rht:
        x2 = _rht(x2, rht_d)
    x_hp, nan = split_nan(x2.float(), check_finite)     # NaN: quantized as 0, then marked
    rows, cols = x_hp.shape
    amax = x_hp.abs().amax()
    vmax = x_hp.abs().reshape(rows, cols // MX_BLOCK, MX_BLOCK).amax(dim=-1)
    k = mx_scale_exponent(vmax, elem, scale_rounding)
    # x / 2^k as x * 2^-k: 2^-k is exact for k in [-127, 127], so both round identically.
    y = x_hp * exp2_int(-k).repeat_interleave(MX_BLOCK, dim=1)
    if fmt == QFormat.MXFP4:
        y = y.clamp(-6.0, 6.0)
        if stochastic:
            bits = rand_bits if rand_bits is not None else \
                random_bytes(y.shape, generator, y.device, seed)
            codes = e2m1_stochastic_encode(y, rand_bits_like(bits, y))
        else:
            codes = e2m1_encode(y)
        data = pack_nibbles(codes)
        scale_nan = None if nan is None else nan.reshape(rows, cols // MX_BLOCK, MX_BLOCK).any(-1)
    else:                           # FP8 elements hold the NaN themselves
        data = mark_nan(fp8_cast_satfinite(y, elem.torch_dtype), nan, NAN_BYTE_FP8)
        scale_nan = None
    scale = mark_nan(e8m0_encode_exponent(k), scale_nan, NAN_BYTE_E8M0)
    return QuantizedTensor(
        fmt=fmt, data=data, scale=scale, amax=amax, shape=x.shape,
        orig_dtype=x.dtype, block=(1, MX_BLOCK), rht_d=rht_d if rht else 0,
        extra={"scale_rounding": scale_rounding, "stochastic": stochastic},
    )
