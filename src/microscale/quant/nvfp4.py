"""NVFP4 reference quantizer (SPEC §2, §3, §5): E2M1 elements, E4M3 block scales, fp32 amax.

Two-level scaling. A per-tensor fp32 factor maps the tensor's amax onto the largest value the
two lower levels can express together (6 · 448 = 2688); a per-block E4M3 scale then maps
each 16-element block's own max onto the E2M1 max, 6::

    S_enc  = min(2688 / amax, FLT_MAX)         (amax = inf → S_enc = 1)
    S_dec  = 1 / S_enc
    s_b    = e4m3_rne(clamp(vmax_b * fp32(S_enc * fp32(1/6)), ±448))     stored byte
    enc_b  = min(1 / (fp32(s_b) * S_dec), FLT_MAX)
    code_i = e2m1(clamp(x_i * enc_b, ±6))      RNE, or stochastic rounding (SPEC §5)
    x̂_i    = value(code_i) * fp32(s_b) * S_dec

Every line is fp32 arithmetic in the order written (that order is the bit-exact contract
kernels follow). In 2D mode (weights) ``vmax_b`` is taken over a 16×16 tile, and the tile's
byte is stored on each of its 16 rows, so the scale tensor keeps the 1D shape
``[rows, cols/16]`` and the quantized transpose is the transpose of the quantized tensor.

Memory: 4.5 bits per element (0.5 byte of codes + 1/16 byte of scale), vs 16 for bf16.
"""

from __future__ import annotations

import torch

from ..formats import FLT_MAX, e2m1_encode, e2m1_stochastic_encode, fp8_cast_satfinite
from ..formats import pack_nibbles
from ..hadamard import rht as _rht
from ..tensor import QFormat, QuantizedTensor
from .common import (NAN_BYTE_FP8, as_rows, check_given_scalar, check_input, mark_nan,
                     rand_bits_like, random_bytes, split_nan)

__all__ = ["quantize_nvfp4", "nvfp4_amax", "nvfp4_global_scales", "nvfp4_alpha", "NVFP4_BLOCK"]

NVFP4_BLOCK = 16
_INV6 = torch.tensor(1.0 / 6.0, dtype=torch.float32).item()  # fp32(1/6) as a Python float


def nvfp4_global_scales(amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(S_enc, S_dec)`` from the fp32 amax, per SPEC §2 step 2 (0-dim fp32 tensors)."""
    amax = amax.float()
    # tensor / tensor: Python's ``2688.0 / amax`` runs as ``amax.reciprocal() * 2688`` (two
    # roundings), which is off by an ulp for ~1/4 of amaxes; SPEC wants one IEEE fp32 division.
    s_enc = torch.clamp(torch.full_like(amax, 2688.0) / amax, max=FLT_MAX)  # amax = 0 → inf → FLT_MAX
    s_enc = torch.where(s_enc == 0, torch.ones_like(s_enc), s_enc)  # amax = inf
    return s_enc, 1.0 / s_enc


def nvfp4_alpha(amax_a: torch.Tensor, amax_b: torch.Tensor) -> torch.Tensor:
    """GEMM epilogue factor ``α = amax_a · amax_b / 7225344`` (SPEC §6; 7225344 = 6²·448²).

    α is ``S_dec_a · S_dec_b`` with ``S_dec = amax / 2688``; an infinite amax (non-finite
    input under ``check_finite=False``) has ``S_dec = 1`` (SPEC §2), so it enters α as 2688.
    """
    a, b = (torch.nan_to_num(t.float(), nan=float("nan"), posinf=2688.0, neginf=2688.0)
            for t in (amax_a, amax_b))             # one op each (a where/isinf/full_like: three)
    return a * b / 7225344.0


def _block_vmax(x_hp: torch.Tensor, block_2d: bool) -> torch.Tensor:
    """Per-block max|x| as fp32 ``[rows, cols/16]`` (2D: the tile max on each of its rows)."""
    rows, cols = x_hp.shape
    a = x_hp.abs()
    if not block_2d:
        return a.reshape(rows, cols // 16, 16).amax(dim=-1)
    tiles = a.reshape(rows // 16, 16, cols // 16, 16).amax(dim=(1, 3))
    return tiles.repeat_interleave(16, dim=0)


def _rotated(x2: torch.Tensor, rht: bool, rht_d: int, check_finite: bool):
    """``(x_hp, NaN mask)``: the rows ``x2`` after the RHT where asked, in fp32, NaN read as 0."""
    if rht:
        x2 = _rht(x2, rht_d)
    return split_nan(x2.float(), check_finite)


def _measured(x_hp: torch.Tensor) -> torch.Tensor:
    return x_hp.abs().amax() if x_hp.numel() else torch.zeros((), device=x_hp.device)


def nvfp4_amax(x: torch.Tensor, rht: bool = False, rht_d: int = 16) -> torch.Tensor:
    """The fp32 amax that :func:`quantize_nvfp4` measures for ``x`` (along its last dim; after
    the RHT where ``rht``; NaN read as 0, as ``check_finite=False`` reads it): what a view
    measured beside another in one pass (``quantize_rowcol``'s ``amax_only`` column view) is
    held to."""
    x_hp, _ = _rotated(as_rows(x), rht, rht_d, False)
    return _measured(x_hp).float().reshape(())


def quantize_nvfp4(
    x: torch.Tensor,
    block_2d: bool = False,
    rht: bool = False,
    stochastic: bool = False,
    generator: torch.Generator | None = None,
    rht_d: int = 16,
    amax: torch.Tensor | None = None,
    rand_bits: torch.Tensor | None = None,
    check_finite: bool = True,
    seed: torch.Tensor | None = None,
) -> QuantizedTensor:
    """Quantize ``x`` to NVFP4 along its last dimension (leading dims flattened to rows).

    Args:
        block_2d: one scale per 16×16 tile (weights) instead of per 1×16 block.
        rht: apply the RHT of size ``rht_d`` first; ``amax`` and scales are of the result.
        stochastic: stochastic rounding with bytes from ``generator`` (or ``rand_bits``,
            a uint8 tensor of x's flattened shape, for bit-exact kernel tests, or a
            generator seeded with ``seed``, an integer tensor from ``common.draw_seed``).
        amax: use this fp32 amax instead of measuring it (e.g. a shared or delayed amax).
        check_finite: raise on NaN/Inf input and on a given ``amax`` that is not finite and
            > 0. With False, ±Inf and NaN follow docs/SPEC.md "Notes: non-finite input" (Inf
            saturates to ±6 with S_enc = 1; a NaN makes its block's scale byte NaN, 0x7F).
    """
    x2 = as_rows(check_input(x, "nvfp4", NVFP4_BLOCK, 16 if block_2d else 1, check_finite))
    check_given_scalar(amax, "amax", "nvfp4", check_finite)
    x_hp, nan = _rotated(x2, rht, rht_d, check_finite)  # NaN: quantized as 0, then marked
    amax = (_measured(x_hp) if amax is None else amax).float().reshape(())
    s_enc, s_dec = nvfp4_global_scales(amax)

    s_b = _block_vmax(x_hp, block_2d) * (s_enc * _INV6)
    s_b = torch.clamp(s_b, -448.0, 448.0)          # FLT_MAX min is implied by the 448 clamp
    scale = fp8_cast_satfinite(s_b, torch.float8_e4m3fn)
    enc_b = torch.clamp(1.0 / (scale.float() * s_dec), max=FLT_MAX)

    y = torch.clamp(x_hp * enc_b.repeat_interleave(16, dim=1), -6.0, 6.0)
    if stochastic:
        if rand_bits is None:
            rand_bits = random_bytes(y.shape, generator, y.device, seed)
        codes = e2m1_stochastic_encode(y, rand_bits_like(rand_bits, y))
    else:
        codes = e2m1_encode(y)
    if nan is not None:             # E2M1 has no NaN: the block's scale carries it
        scale = mark_nan(scale, _block_vmax(nan.float(), block_2d) > 0, NAN_BYTE_FP8)
    return QuantizedTensor(
        fmt=QFormat.NVFP4, data=pack_nibbles(codes), scale=scale, amax=amax, shape=x.shape,
        orig_dtype=x.dtype, block=(16, 16) if block_2d else (1, 16), rht_d=rht_d if rht else 0,
        extra={"stochastic": stochastic},
    )
