"""Element formats as data, and their exact casts.

Every block-scaled format in microscale stores small *elements* plus a *scale* per block.
This module owns the elements and the scale encodings, nothing else:

======== ======================= ============================== ==========================
name     bits                    values                         special
======== ======================= ============================== ==========================
E2M1     s.ee.m  (FP4)           ±{0, .5, 1, 1.5, 2, 3, 4, 6}   no inf/NaN, saturating
E4M3     s.eeee.mmm, bias 7      max 448, min subnormal 2^-9    NaN = 0x7F/0xFF, no inf
E5M2     s.eeeee.mm, bias 15     max 57344                      IEEE inf/NaN
UE8M0    eeeeeeee                2^(e-127), e = 0..254          0xFF = NaN
======== ======================= ============================== ==========================

E2M1 codes are 4 bits: bit 3 is the sign, bits 0-2 index the magnitude grid
``0, 0.5, 1, 1.5, 2, 3, 4, 6``. Rounding is round-to-nearest-even *on the codes* (ties go to
the even magnitude code), which gives the SPEC §1 ties 0.25→0, 0.75→1, 1.25→1, 1.75→2,
2.5→2, 3.5→4, 5→4. Negative zero keeps its sign (code 8); both zeros decode to 0.

FP4 packing puts two codes in a byte, row-major: element ``2j`` in the low nibble and
``2j+1`` in the high nibble, so a ``[rows, cols]`` code tensor packs to ``uint8[rows, cols/2]``.

FP8 casts are RNE with saturation to ±max ("satfinite"): the input is clamped first, so the
torch cast never sees an out-of-range value (torch and ml_dtypes disagree there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .validate import check_fp8_dtype

__all__ = [
    "ElemFormat", "E2M1", "E4M3", "E5M2", "ELEM_FORMATS", "FLT_MAX",
    "e2m1_encode", "e2m1_decode", "e2m1_stochastic_encode", "pack_fp4", "pack_nibbles",
    "unpack_fp4",
    "fp8_cast_satfinite", "e8m0_encode_exponent", "e8m0_decode",
]

FLT_MAX = 3.4028234663852886e38  # fp32 max, exactly representable

# The E2M1 magnitude grid, indexed by the 3-bit magnitude code.
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


@dataclass(frozen=True)
class ElemFormat:
    """An element format: its name, storage dtype, largest finite value and max exponent."""

    name: str
    max: float
    emax: int  # exponent of the largest power of two <= max (OCP "emax_elem")
    torch_dtype: torch.dtype | None  # None for FP4 (stored as packed uint8 codes)
    bits: int


E2M1 = ElemFormat("e2m1", 6.0, 2, None, 4)
E4M3 = ElemFormat("e4m3", 448.0, 8, torch.float8_e4m3fn, 8)
E5M2 = ElemFormat("e5m2", 57344.0, 15, torch.float8_e5m2, 8)
ELEM_FORMATS = {f.name: f for f in (E2M1, E4M3, E5M2)}

_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def fp8_cast_satfinite(x: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """Round ``x`` to ``fp8_dtype`` with RNE, saturating to ±max (NaN stays NaN)."""
    m = _FP8_MAX[check_fp8_dtype(fp8_dtype)]
    return x.float().clamp(-m, m).to(fp8_dtype)


def e2m1_encode(y: torch.Tensor) -> torch.Tensor:
    """RNE-round fp32 values to E2M1 codes (uint8 in 0..15), clamping to ±6 first.

    The grid spacing is 0.5 below 2, 1 below 4 and 2 above, so on each stretch the magnitude
    code is ``round_half_even(|y| / step) + offset`` (offset 0, 2, 4). The division is by a
    power of two (exact), and ``torch.round`` rounds ties to even, which is RNE on the codes:
    0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4. NaN is not a valid input (callers
    reject it); it encodes to the largest magnitude.
    """
    y = y.float()
    a = torch.nan_to_num(y.abs().clamp(max=6.0), nan=6.0)
    ge2, ge4 = (a >= 2.0).float(), (a >= 4.0).float()
    step = 0.5 + 0.5 * ge2 + ge4
    mag = (torch.round(a / step) + 2.0 * (ge2 + ge4)).to(torch.uint8)
    return (torch.signbit(y).to(torch.uint8) << 3) | mag


def e2m1_stochastic_encode(y: torch.Tensor, rand_u8: torch.Tensor) -> torch.Tensor:
    """Stochastically round fp32 values to E2M1 codes, following the Blackwell instruction.

    Per element, with 8 random bits ``r`` and ``u = r / 256``: ``a = |y|``; ``step(a)`` is the
    grid spacing at ``a`` (0.5 below 2, 1 below 4, else 2); ``t = a + u * step(a)``;
    ``q = min(floor(t / step(t)) * step(t), 6)``. Grid values never move (u < 1). All fp32.
    """
    if rand_u8.shape != y.shape or rand_u8.dtype != torch.uint8:
        raise ValueError(f"rand_u8 must be uint8 with shape {tuple(y.shape)}, got "
                         f"{rand_u8.dtype} {tuple(rand_u8.shape)}")
    y = y.float()
    a = y.abs().clamp(max=6.0)
    u = rand_u8.float() * (1.0 / 256.0)
    t = a + u * _e2m1_step(a)
    step_t = _e2m1_step(t)
    q = torch.clamp(torch.floor(t / step_t) * step_t, max=6.0)
    return e2m1_encode(torch.copysign(q, y))


def _e2m1_step(a: torch.Tensor) -> torch.Tensor:
    """Grid spacing at ``a >= 0``: 0.5 below 2, 1 below 4, else 2 (exact, branch-free)."""
    return 0.5 + 0.5 * (a >= 2.0).float() + (a >= 4.0).float()


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8, 0..15) to fp32 values. Code 8 (−0) decodes to -0.0."""
    if codes.dtype != torch.uint8:
        raise TypeError(f"E2M1 codes must be uint8, got {codes.dtype}")
    return _e2m1_table(codes.device)[(codes & 15).long()]


_TABLES: dict[torch.device, torch.Tensor] = {}


def _e2m1_table(device: torch.device) -> torch.Tensor:
    """The 16 signed code values (codes 8..15 are the negatives, 8 being -0.0) on ``device``."""
    if device not in _TABLES:
        grid = torch.tensor(E2M1_GRID, dtype=torch.float32)
        _TABLES[device] = torch.cat((grid, -grid)).to(device)
    return _TABLES[device]


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Pack E2M1 codes ``[..., n]`` (uint8 in 0..15, n even) to bytes ``[..., n/2]``: even index
    in the low nibble. A code above 15 is a ValueError (its high bits would be dropped)."""
    if not isinstance(codes, torch.Tensor):
        raise TypeError(f"codes must be a torch.Tensor, got {type(codes).__name__}")
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8, got {codes.dtype}")
    if codes.dim() == 0 or codes.shape[-1] % 2:
        raise ValueError(f"codes: last dim must be even to pack FP4, got shape {tuple(codes.shape)}")
    if codes.device.type != "meta" and codes.numel() and bool((codes > 15).any()):
        raise ValueError(f"codes must be E2M1 codes in 0..15, got a maximum of {int(codes.max())}")
    return pack_nibbles(codes)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """:func:`pack_fp4` without its checks, for codes a quantizer has just produced (no sync)."""
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_fp4`: bytes ``[..., n/2]`` to codes ``[..., n]``."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed FP4 data must be uint8, got {packed.dtype}")
    lo, hi = packed & 0xF, packed >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def e8m0_encode_exponent(k: torch.Tensor) -> torch.Tensor:
    """Unbiased exponents ``k`` (int, clamped to [-127, 127]) to UE8M0 bytes ``k + 127``."""
    return (k.clamp(-127, 127) + 127).to(torch.uint8)


def e8m0_decode(e: torch.Tensor) -> torch.Tensor:
    """UE8M0 bytes to fp32 ``2^(e-127)``; byte 255 decodes to NaN. Exact (2^-127 is subnormal)."""
    if e.dtype != torch.uint8:
        raise TypeError(f"UE8M0 scales must be uint8 bytes, got {e.dtype}")
    val = torch.ldexp(torch.ones_like(e, dtype=torch.float32), e.to(torch.int32) - 127)
    return torch.where(e == 255, torch.full_like(val, float("nan")), val)
