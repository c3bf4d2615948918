"""Building blocks shared by the quantization kernels: exact fp32 bit arithmetic in Triton.

Every kernel here must reproduce the reference quantizers bit for bit, on the GPU and in
Triton's CPU interpreter alike. Two facts shape this file:

* Triton's float casts are not portable: the interpreter truncates fp32 -> bf16/fp8 instead
  of rounding to nearest even, and ``a / b`` on the GPU is an approximate division. So the
  roundings the spec needs are written here with integer operations on the fp32 bit pattern
  (``fp8_rne_byte``, ``round_to_input_dtype``), and every division is ``tl.math.div_rn``.
* The formats are defined on fp32 values, so every helper takes and returns fp32 tiles.

RNE to a format with ``M`` mantissa bits, on the fp32 bits ``b`` of a normal value: add
``2^(22-M) - 1`` plus the lowest kept bit (ties go to even), then drop ``23 - M`` bits; a
carry into the exponent is the correct rounding up. Values below the format's smallest normal
``2^emin`` sit on a fixed grid of step ``2^(emin-M)``: scaled to integers (exact, a power of
two) they round with the classic ``(v + 2^23) - 2^23`` trick, and the integer is already the
subnormal byte (``2^M`` lands on the smallest normal, exponent field 1, as it should).

Edges follow the references (docs/SPEC.md, "Notes"): :func:`split_nan` zeroes NaN and returns
its mask (the callers store the NaN byte where the format holds it), the RHT clamps its input
to ``±L(d)`` and saturates its result to the input dtype (``hadamard.rht``), and every clamp
that may meet a NaN is a ``tl.where`` (``tl.minimum`` drops NaN on the GPU, keeps it in the
interpreter).

E2M1 rounding (codes and values) lives in ``_e2m1``; codes are packed two per byte, even
element in the low nibble. The RHT of a tile lives in ``_rht``.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# the host side (argument checks, buffers, grids, per-device caches) lives in _host; it is
# re-exported here, where the kernel modules have always imported it from
from ._host import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_rand_bits,  # noqa: F401
                    check_views, device_capability, gemm_out, interpreting, kernel_seed,
                    multiprocessors, persistent_grid, placeholder, rht_matrix_on,
                    take_prologue)

__all__ = ["IN_DTYPE_CODE", "check_kernel_input", "check_views", "check_rand_bits", "kernel_seed",
           "placeholder", "cdiv", "gemm_out",
           "rht_matrix_on", "persistent_grid", "split_nan", "block_flag", "take_prologue"]

# Triton's interpreter multiplies bf16 operands of tl.dot as raw integers: it takes the fp32
# path (same values, the products being exact either way). Read once, at import.
TENSOR_CORE_RHT = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")
# On the GPU, fp32 -> bf16/fp8 use the hardware RNE conversions (cvt.rn[.satfinite]); in the
# interpreter (whose casts truncate) and with MICROSCALE_NATIVE_CASTS=0, the integer versions.
NATIVE_CASTS = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1"
                            and os.environ.get("MICROSCALE_NATIVE_CASTS", "1") == "1")
FLT_MAX_F32 = 3.4028234663852886e38
# The GPU's fp32 max (PTX max.f32, Triton's default tl.maximum) returns the other operand when
# one is NaN; Triton 3.6's interpreter returns NaN (np.maximum), so there NaN is selected away.
GPU_MAXNUM = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")


# --------------------------------------------------------------------------- fp32 bit helpers
@triton.jit
def round_to_input_dtype(y, IN_DTYPE: tl.constexpr):
    """Round fp32 ``y`` to the input dtype (0 fp32, 1 bf16, 2 fp16) with RNE; return fp32."""
    if IN_DTYPE == 1 and NATIVE_CASTS:
        return y.to(tl.bfloat16, fp_downcast_rounding="rtne").to(tl.float32)
    elif IN_DTYPE == 1:
        b = y.to(tl.uint32, bitcast=True)
        b = b + 0x7FFF + ((b >> 16) & 1)
        return ((b >> 16) << 16).to(tl.float32, bitcast=True)
    elif IN_DTYPE == 2:
        return y.to(tl.float16).to(tl.float32)
    else:
        return y


@triton.jit
def floor_log2_sig(v):
    """For positive finite fp32 ``v`` (subnormals too): ``(floor(log2 v), mantissa bits)``."""
    sub = v < 1.1754943508222875e-38
    vn = tl.where(sub, v * 16777216.0, v)           # 2^24: exact, normalises subnormals
    b = vn.to(tl.int32, bitcast=True)
    e = ((b >> 23) & 0xFF) - 127 - tl.where(sub, 24, 0)
    return e, b & 0x7FFFFF


@triton.jit
def exp2_int(n):
    """Exact fp32 ``2^n`` for int32 ``n`` in [-149, 127] (subnormal results included)."""
    normal = ((n + 127) << 23).to(tl.float32, bitcast=True)
    sub = (1 << tl.minimum(tl.maximum(n + 149, 0), 22)).to(tl.float32, bitcast=True)
    return tl.where(n >= -126, normal, sub)


@triton.jit
def fp8_rne_byte(v, MANT: tl.constexpr, EMIN: tl.constexpr, BIAS: tl.constexpr,
                 MAXV: tl.constexpr, SUB_SCALE: tl.constexpr, MIN_NORMAL: tl.constexpr):
    """fp32 -> FP8 byte, RNE with saturation to +-MAXV; the sign of -0 is kept."""
    a = tl.minimum(tl.abs(v), MAXV)
    bits = a.to(tl.int32, bitcast=True)
    SHIFT: tl.constexpr = 23 - MANT
    r = bits + ((1 << (SHIFT - 1)) - 1) + ((bits >> SHIFT) & 1)
    normal = ((((r >> 23) - 127 + BIAS) << MANT) | ((r >> SHIFT) & ((1 << MANT) - 1)))
    sub = ((tl.minimum(a, MIN_NORMAL) * SUB_SCALE + 8388608.0) - 8388608.0).to(tl.int32)
    mag = tl.where(a >= MIN_NORMAL, normal, sub)
    sign = (v.to(tl.int32, bitcast=True) >> 24) & 0x80
    return (mag | sign).to(tl.uint8)


@triton.jit
def e4m3_byte(v):
    if NATIVE_CASTS:    # cvt.rn.satfinite: out of range and +-Inf saturate to +-448 (no clamp)
        out = v.to(tl.float8e4nv, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
    else:
        out = fp8_rne_byte(v, 3, -6, 7, 448.0, 512.0, 0.015625)  # subnormal step 2^-9
    return out


@triton.jit
def e5m2_byte(v):
    if NATIVE_CASTS:    # cvt.rn.satfinite, as above (+-57344)
        out = v.to(tl.float8e5, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
    else:
        out = fp8_rne_byte(v, 2, -14, 15, 57344.0, 65536.0, 6.103515625e-05)  # step 2^-16
    return out


@triton.jit
def e4m3_value(byte, NATIVE: tl.constexpr = False):
    """Positive E4M3 byte (no NaN) -> its exact fp32 value (``NATIVE``, on the GPU: the
    hardware's ``cvt.rn.f16x2.e4m3x2``, for ~10 integer instructions a byte)."""
    if NATIVE and NATIVE_CASTS:
        return byte.to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float32)
    b = byte.to(tl.int32)
    e = b >> 3
    m = b & 7
    normal = (((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    return tl.where(e > 0, normal, m.to(tl.float32) * 0.001953125)


# --------------------------------------------------------------------------- MX scales
@triton.jit
def mx_exponent(vmax, ELEM: tl.constexpr, CEIL: tl.constexpr):
    """Block exponent k (int32, [-127, 127]; vmax = 0 -> -127) from fp32 block maxima."""
    pos = vmax > 0.0
    fl, mant = floor_log2_sig(tl.where(pos, vmax, 1.0))
    if ELEM == 0:
        k = fl - 8
    elif ELEM == 1:
        k = fl - 15
    else:
        k = fl - 2
    if CEIL:
        if ELEM == 2:
            k = k + (mant > 0x400000).to(tl.int32)           # significand > 1.5
        else:
            k = k + (mant > 0x600000).to(tl.int32)           # significand > 1.75
    k = tl.minimum(tl.maximum(k, -127), 127)
    k = tl.where(vmax > 3.4028234663852886e38, 0, k)        # Inf: the unit scale
    return tl.where(pos, k, -127)


# --------------------------------------------------------------------------- NVFP4 scales
@triton.jit
def nvfp4_global_scales(amax_ptr):
    """``(fp32(S_enc * fp32(1/6)), S_dec)`` from the fp32 amax at ``amax_ptr`` (SPEC §2 step 2)."""
    return nvfp4_scales_of(tl.load(amax_ptr))


@triton.jit
def nvfp4_amax_of(amax_ptr, slot, n_part, NP: tl.constexpr):
    """View ``slot``'s (0 row, 1 column) amax: ``amax_ptr[slot]``, or with ``NP`` > 0 the max of
    the amax pass's ``n_part`` per-program maxima (``amax_ptr[2p + slot]``, ``NP`` ≥ n_part a
    power of two), so no zeroed buffer and no atomics are needed (max is exact in any order)."""
    if NP == 0:           # (if/else, not an early return: Triton compiles past a return)
        amax = tl.load(amax_ptr + slot)
    else:
        p = tl.arange(0, NP)
        amax = tl.max(tl.load(amax_ptr + 2 * p + slot, mask=p < n_part, other=0.0), axis=0)
    return amax


@triton.jit
def store_amaxes(amax_r, amax_c, ar_ptr, ac_ptr, ROW: tl.constexpr, COL: tl.constexpr,
                 NP: tl.constexpr):
    """With ``NP`` > 0 (per-program maxima), program 0 writes the amax of each view the launch
    quantizes to its own output (no buffer shared by the two, so none is copied)."""
    if NP > 0:
        if tl.program_id(0) == 0:
            if ROW:
                tl.store(ar_ptr, amax_r)
            if COL:
                tl.store(ac_ptr, amax_c)


@triton.jit
def nvfp4_scales_of(amax):
    """:func:`nvfp4_global_scales` of an fp32 amax value."""
    s_enc = tl.minimum(tl.math.div_rn(2688.0, amax), 3.4028234663852886e38)
    s_enc = tl.where(s_enc == 0.0, 1.0, s_enc)
    return s_enc * 0.1666666716337204, tl.math.div_rn(1.0, s_enc)   # fp32(S_enc*fp32(1/6))


@triton.jit
def nvfp4_block_scales(vmax, s_enc6, s_dec, NATIVE: tl.constexpr = False):
    """E4M3 scale bytes and fp32 encode factors from fp32 block maxima (SPEC §2 steps 3-4)."""
    scale_byte = e4m3_byte(tl.minimum(vmax * s_enc6, 448.0))
    enc = tl.minimum(tl.math.div_rn(1.0, e4m3_value(scale_byte, NATIVE) * s_dec),
                     3.4028234663852886e38)
    return scale_byte, enc


@triton.jit
def rotated_block_max(ys):
    """Block maxima ``max_k |ys[k]|`` of RHT'd 16-element blocks given as 16 tensors (element
    k of every block in ``ys[k]``), and where a block holds NaN: the rotation spreads a NaN
    over its whole chunk, so element 0 tells. A NaN block's maximum is meaningless (the GPU's
    max drops NaN, the interpreter's keeps it): the caller gives that block the NaN byte."""
    vmax = tl.abs(ys[0])
    for k in tl.static_range(1, 16):
        vmax = tl.maximum(vmax, tl.abs(ys[k]))
    return vmax, ys[0] != ys[0]


@triton.jit
def abs_nan0(v):
    """``|v|`` with NaN read as 0, what every NVFP4 maximum sees (the GPU's max drops NaN,
    the interpreter's keeps it)."""
    return tl.where(v != v, 0.0, tl.abs(v))


@triton.jit
def _max_keep_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def max_keep_nan(v, axis):
    """The maximum of ``v`` along ``axis``, NaN if any element is (one ``max.NaN`` an element
    on the GPU, as the plain maximum costs; ``tl.max`` drops NaN there)."""
    return tl.reduce(v, axis, _max_keep_nan)


@triton.jit
def abs_for_max(v):
    """``|v|`` for a ``tl.max`` reduction that reads NaN as 0: on the GPU the reduction's max
    drops NaN itself (one instruction an element, the abs a modifier), in the interpreter
    NaN is zeroed first (:func:`abs_nan0`)."""
    if GPU_MAXNUM:
        out = tl.abs(v)
    else:
        out = abs_nan0(v)
    return out


@triton.jit
def max_abs(acc, v):
    """``max(acc, |v|)`` for a running maximum ``acc >= 0``, NaN in v read as 0: on the GPU one
    max instruction (it drops NaN), in the interpreter after :func:`abs_nan0`."""
    if GPU_MAXNUM:
        return tl.maximum(acc, tl.abs(v))
    else:
        return tl.maximum(acc, abs_nan0(v))


@triton.jit
def pack_pairs(codes, R: tl.constexpr, C: tl.constexpr):
    """int32 codes ``[R, C]`` -> uint8 ``[R, C/2]``, element 2j low nibble, 2j+1 high."""
    c3 = tl.reshape(codes, (R, C // 2, 2))
    sh = (tl.arange(0, 2) * 4)[None, None, :]
    return tl.sum(c3 << sh, axis=2).to(tl.uint8)


@triton.jit
def word_byte(w, K: tl.constexpr):
    """Byte K (0..3) of the int32/uint32 words ``w`` as int32."""
    return ((w.to(tl.uint32, bitcast=True) >> (8 * K)) & 255).to(tl.int32)


@triton.jit
def bits_byte(w0, w1, w2, w3, K: tl.constexpr):
    """Byte K (0..15, a compile-time index) of the 128 bits ``w0..w3`` (e.g. one
    ``tl.randint4x``), as int32: ``select_byte`` for an index known when compiling."""
    if K < 4:
        w = w0
    elif K < 8:
        w = w1
    elif K < 12:
        w = w2
    else:
        w = w3
    return word_byte(w, K % 4)


@triton.jit
def bf16_pair(lo, hi):
    """One int32 word holding the bf16 bits of fp32 ``lo`` (low half) and ``hi`` (high half),
    exact bf16 numbers: the bytes of the two consecutive bf16 in memory. A number exact in bf16
    has 16 zero low bits in fp32, so its bf16 bits are the fp32 word's top half: two integer
    ops (a byte permute), not two conversions on the slow F2F pipe."""
    lo16 = lo.to(tl.uint32, bitcast=True) >> 16
    return (lo16 | (hi.to(tl.uint32, bitcast=True) & 0xFFFF0000)).to(tl.int32, bitcast=True)


@triton.jit
def stack_last(t, N: tl.constexpr):
    """A tuple of N (4, 8 or 16) same-shaped 2-D tensors -> one ``[a, b, N]`` in order, in
    registers: joined pairwise (bit k of the index on the k-th new axis), then those axes
    reversed and merged. One layout change for a later store instead of one per tensor."""
    tl.static_assert(N == 4 or N == 8 or N == 16, "stack_last takes 4, 8 or 16 tensors")
    p = ()
    for k in tl.static_range(N // 2):
        p = p + (tl.join(t[2 * k], t[2 * k + 1]),)
    if N >= 8:
        q = ()
        for k in tl.static_range(N // 4):
            q = q + (tl.join(p[2 * k], p[2 * k + 1]),)
        p = q
    if N == 16:
        p = (tl.join(p[0], p[1]), tl.join(p[2], p[3]))
    out = tl.join(p[0], p[1])
    if N == 4:
        out = tl.permute(out, (0, 1, 3, 2))
    elif N == 8:
        out = tl.permute(out, (0, 1, 4, 3, 2))
    else:
        out = tl.permute(out, (0, 1, 5, 4, 3, 2))
    return tl.reshape(out, (out.shape[0], out.shape[1], N))


@triton.jit
def pack16(codes, k, AXIS: tl.constexpr):
    """16 E2M1 codes along ``AXIS`` (position ``k``, 0..15, broadcast) -> two uint32 words.

    Word 0 holds codes 0-7 (code i in bits 4i..4i+3), word 1 codes 8-15: little-endian,
    exactly the bytes ``pack_fp4`` makes. Multiplying by a per-position power of 16 (0 for
    the other word) lets the compiler fuse shift and sum into one multiply-add per code.
    """
    c = codes.to(tl.uint32)
    m_lo = tl.where(k < 8, 1 << (4 * (k % 8)), 0).to(tl.uint32)
    m_hi = tl.where(k < 8, 0, 1 << (4 * (k % 8))).to(tl.uint32)
    return tl.sum(c * m_lo, axis=AXIS), tl.sum(c * m_hi, axis=AXIS)


@triton.jit
def select_byte(w0, w1, w2, w3, k):
    """Byte ``k`` (0..15, broadcast against the words) of the 128 bits ``w0..w3``, as int32."""
    w = tl.where(k < 4, w0, tl.where(k < 8, w1, tl.where(k < 12, w2, w3)))
    return ((w.to(tl.uint32, bitcast=True) >> ((k % 4) * 8).to(tl.uint32)) & 255).to(tl.int32)


@triton.jit
def clamp_keep_nan(v, lim):
    """``clamp(v, -lim, lim)`` that leaves NaN as NaN on every backend: the NaN-propagating
    min/max (PTX ``min.NaN``/``max.NaN``, one instruction each; ``np.minimum``/``np.maximum`` in
    the interpreter), not two compares and two selects. ``-0.0`` stays ``-0.0``."""
    return tl.minimum(tl.maximum(v, -lim, propagate_nan=tl.PropagateNan.ALL), lim,
                      propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def split_nan(v):
    """``(v with NaN replaced by +0, NaN mask)``: as ``quant.common.split_nan``."""
    nan = v != v
    return tl.where(nan, 0.0, v), nan


@triton.jit
def block_flag(mask, AXIS: tl.constexpr):
    """Whether any element along ``AXIS`` of a boolean tile is set (as a boolean tile)."""
    return tl.max(mask.to(tl.int32), axis=AXIS) > 0


@triton.jit
def tile_coords(t, n_tc, BR: tl.constexpr, BC: tl.constexpr):
    """Tile index ``t`` (row-major over a grid of ``n_tc`` tile columns) -> (row0, col0)."""
    return (t // n_tc) * BR, (t % n_tc) * BC


@triton.jit
def tile_coords_hoisted(t, n_tc, BR: tl.constexpr, BC: tl.constexpr):
    """:func:`tile_coords` by a high multiply with ``floor((2^32 - 1) / n_tc)`` (one short at
    most for ``t < 2^32``), corrected: ~7 instructions a tile for a signed division's ~27 (the
    divisor is known non-zero, so the one division is hoisted out of a persistent loop)."""
    n = tl.maximum(tl.cast(n_tc, tl.uint32), 1)        # (n_tc may be a constexpr 1)
    q = tl.umulhi(tl.cast(t, tl.uint32), tl.full([], 0xFFFFFFFF, tl.uint32) // n)
    r = tl.cast(t, tl.uint32) - q * n
    fix = r >= n
    return tl.where(fix, q + 1, q).to(tl.int32) * BR, tl.where(fix, r - n, r).to(tl.int32) * BC


@triton.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """``(pid_m, pid_n)`` of a GEMM tile in grouped order: GROUP_M neighbouring row tiles run
    one after another on each column tile, so that B tile is still in L2 when they need it."""
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    group_start = (pid // width) * GROUP_M
    rows_in_group = tl.minimum(grid_m - group_start, GROUP_M)
    return group_start + (pid % width) % rows_in_group, (pid % width) // rows_in_group
