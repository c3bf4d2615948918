"""The MX kernel's per-tile views (``quant_mx._mx_kernel``): device functions only.

* :func:`mx_row_view`: the tile read as ``[BR, BC/32, 32]``, blocks of 32 along x's columns;
* :func:`mx_col_view`: the tile read as ``[BR/32, 32, BC]``, blocks of 32 along x's rows (the
  quantized ``xᵀ`` that wgrad reads), with no transpose in registers: the block max is a
  reduction across threads, the codes are packed by a cross-thread multiply-sum and the RHT is
  an fp32 ``[32, 32]`` dot. MXFP4 column views take ``quant_mx_col``'s path instead (a block
  in one thread) unless ``quant_mx.CONFIG['COL_REG']`` is off; MXFP8 column views stay here.

The per-block arithmetic (``quant_mx``'s module docstring) is shared: :func:`mx_elements`
(codes or FP8 bytes), :func:`mx_scale_bytes` (UE8M0 bytes, 0xFF for an MXFP4 NaN block),
:func:`mx4_expanded` (bf16 ``value·2^k``, rounded as a value: ``_e2m1``) and :func:`mx4_words` (32 E2M1 codes -> four
uint32 words).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._rht import rht_cols, rht_tile
from ._e2m1 import e2m1_mag_code, e2m1_round_value, scaled_e2m1_code_fast, sign_nibble
from ._utils import (block_flag, e4m3_byte, e5m2_byte, exp2_int, mx_exponent, pack16,
                     select_byte, split_nan)

__all__ = ["mx_row_view", "mx_col_view", "mx_elements", "mx_scale_bytes", "mx4_expanded",
           "mx4_words"]


@triton.jit
def mx_elements(y, bits, ELEM: tl.constexpr, SR: tl.constexpr, nan):
    """Scaled fp32 values -> E2M1 codes (int32) or FP8 bytes (uint8, NaN where ``nan``)."""
    if ELEM == 2:
        if SR:                      # the code of the SR value (_e2m1: PTX mul.rz on the GPU)
            out = scaled_e2m1_code_fast(y, 1.0, bits, True)
        else:
            out = e2m1_mag_code(tl.minimum(tl.abs(y), 6.0)) | sign_nibble(y)
    elif ELEM == 0:
        out = tl.where(nan, 127, e4m3_byte(y)).to(tl.uint8)
    else:
        out = tl.where(nan, 127, e5m2_byte(y)).to(tl.uint8)
    return out


@triton.jit
def mx_scale_bytes(k, nan, AXIS: tl.constexpr, ELEM: tl.constexpr):
    """UE8M0 bytes k + 127; for MXFP4 (no NaN element) 0xFF where the block holds a NaN."""
    s = k + 127
    if ELEM == 2:
        s = tl.where(block_flag(nan, AXIS), 255, s)
    return s.to(tl.uint8)


@triton.jit
def mx4_expanded(y, bits, SR: tl.constexpr, k, scale_byte):
    """Expanded MXFP4 elements of the scaled fp32 ``y`` (``v · 2^-k``), fp32: ``value(code) ·
    2^k`` (NaN where the scale byte is the NaN byte 0xFF), the products
    ``QuantizedTensor.block_values`` forms, rounded as values (``_e2m1``: no codes); ``k``
    broadcasts."""
    return e2m1_round_value(y, bits, SR) * tl.where(scale_byte == 255, float("nan"), exp2_int(k))


@triton.jit
def mx4_words(codes, k, AXIS: tl.constexpr):
    """32 E2M1 codes along ``AXIS`` (position ``k``) -> 4 uint32 words, as ``[..., 2, 2]``."""
    lo0, lo1 = pack16(tl.where(k < 16, codes, 0), k % 16, AXIS)
    hi0, hi1 = pack16(tl.where(k < 16, 0, codes), k % 16, AXIS)
    return tl.join(tl.join(lo0, lo1), tl.join(hi0, hi1))


@triton.jit
def mx_row_view(x_ptr, m_ptr, seed_ptr, bits_ptr, q_ptr, s_ptr, r0, c0, rows, cols,
                 IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, ELEM: tl.constexpr,
                 CEIL: tl.constexpr, RHT_D: tl.constexpr, SR: tl.constexpr,
                 EXP: tl.constexpr = False):
    """Row view of a tile as ``[BR, BC/32, 32]``; returns per-row maxima for the amax.
    EXP (MXFP4): the view written expanded, bf16 ``[rows, cols]``."""
    offs_r = r0 + tl.arange(0, BR)
    blk = c0 // 32 + tl.arange(0, BC // 32)
    e = tl.arange(0, 32)
    col = blk[:, None] * 32 + e[None, :]
    ok = (offs_r < rows)[:, None] & (blk < cols // 32)[None, :]
    v = tl.load(x_ptr + offs_r[:, None, None] * cols + col[None, :, :], mask=ok[:, :, None],
                other=0.0).to(tl.float32)
    if RHT_D > 0:
        i = tl.arange(0, RHT_D)
        m = tl.load(m_ptr + i[:, None] * RHT_D + i[None, :])
        v = tl.reshape(rht_tile(tl.reshape(v, (BR, BC)), m, BR, BC, RHT_D, IN_DTYPE),
                       (BR, BC // 32, 32))
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=2)                                     # [BR, BC/32]
    k = mx_exponent(vmax, ELEM, CEIL)
    if SR == 1:
        bits = tl.load(bits_ptr + offs_r[:, None, None] * cols + col[None, :, :],
                       mask=ok[:, :, None], other=0).to(tl.int32)
    elif SR == 2:
        seed = tl.load(seed_ptr)
        base = offs_r[:, None] * (cols // 16) + blk[None, :] * 2
        a0, a1, a2, a3 = tl.randint4x(seed, base)
        b0, b1, b2, b3 = tl.randint4x(seed, base + 1)
        lo = (e < 16)[None, None, :]
        bits = select_byte(tl.where(lo, a0[:, :, None], b0[:, :, None]),
                           tl.where(lo, a1[:, :, None], b1[:, :, None]),
                           tl.where(lo, a2[:, :, None], b2[:, :, None]),
                           tl.where(lo, a3[:, :, None], b3[:, :, None]), (e % 16)[None, None, :])
    else:
        bits = 0
    sbyte = mx_scale_bytes(k, nan, 2, ELEM)
    y = v * exp2_int(-k)[:, :, None]
    if ELEM == 2 and EXP:
        val = mx4_expanded(y, bits, SR > 0, k[:, :, None], sbyte[:, :, None])
        tl.store(q_ptr + offs_r[:, None, None] * cols + col[None, :, :], val.to(tl.bfloat16),
                 mask=ok[:, :, None])
    elif ELEM == 2:
        w = tl.arange(0, 2)
        idx = (offs_r[:, None] * (cols // 8) + blk[None, :] * 4)[:, :, None, None] + \
            (w[:, None] + 2 * w[None, :])[None, None, :, :]   # [word, half]
        tl.store(q_ptr + idx, mx4_words(mx_elements(y, bits, ELEM, SR > 0, nan), e[None, None, :],
                                        2), mask=ok[:, :, None, None])
    else:
        tl.store(q_ptr + offs_r[:, None, None] * cols + col[None, :, :],
                 mx_elements(y, bits, ELEM, SR > 0, nan), mask=ok[:, :, None])
    tl.store(s_ptr + offs_r[:, None] * (cols // 32) + blk[None, :], sbyte, mask=ok)
    return vmax                                       # block maxima, for the amax


@triton.jit
def mx_col_view(x_ptr, m_ptr, seed_ptr, bits_ptr, q_ptr, s_ptr, r0, c0, rows, cols,
                 IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, ELEM: tl.constexpr,
                 CEIL: tl.constexpr, RHT_D: tl.constexpr, SR: tl.constexpr,
                 PACK: tl.constexpr, EXP: tl.constexpr = False):
    """Column view of a tile as ``[BR/32, 32, BC]`` (blocks along x's rows), no transpose.
    MXFP8 with PACK: the codes of four consecutive rows go out as one uint32 (fewer, wider
    transposed stores, as ``quant_fp8``'s PACK_COL); same bytes in memory. EXP (MXFP4): the
    view written expanded, bf16 ``[cols, rows]``."""
    offs_c = c0 + tl.arange(0, BC)
    grp = r0 // 32 + tl.arange(0, BR // 32)
    j = tl.arange(0, 32)
    row = grp[:, None] * 32 + j[None, :]
    ok = (grp < rows // 32)[:, None] & (offs_c < cols)[None, :]
    v = tl.load(x_ptr + row[:, :, None] * cols + offs_c[None, None, :], mask=ok[:, None, :],
                other=0.0).to(tl.float32)
    if RHT_D > 0:
        i = tl.arange(0, 32)
        mt = tl.load(m_ptr + i[None, :] * 32 + i[:, None])
        v = rht_cols(v, mt, BR // 32, 32, BC, IN_DTYPE)
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=1)                                     # [G, BC]
    k = mx_exponent(vmax, ELEM, CEIL)
    if SR == 1:
        bits = tl.load(bits_ptr + offs_c[None, None, :] * rows + row[:, :, None],
                       mask=ok[:, None, :], other=0).to(tl.int32)
    elif SR == 2:
        seed = tl.load(seed_ptr) + 1
        base = offs_c[None, :] * (rows // 16) + grp[:, None] * 2
        a0, a1, a2, a3 = tl.randint4x(seed, base)
        b0, b1, b2, b3 = tl.randint4x(seed, base + 1)
        lo = (j < 16)[None, :, None]
        bits = select_byte(tl.where(lo, a0[:, None, :], b0[:, None, :]),
                           tl.where(lo, a1[:, None, :], b1[:, None, :]),
                           tl.where(lo, a2[:, None, :], b2[:, None, :]),
                           tl.where(lo, a3[:, None, :], b3[:, None, :]), (j % 16)[None, :, None])
    else:
        bits = 0
    y = v * exp2_int(-k)[:, None, :]
    sbyte = mx_scale_bytes(k, nan, 1, ELEM)
    if not (ELEM == 2 and EXP):
        out = mx_elements(y, bits, ELEM, SR > 0, nan)
    if ELEM == 2 and EXP:
        val = mx4_expanded(y, bits, SR > 0, k[:, None, :], sbyte[:, None, :])
        tl.store(q_ptr + offs_c[None, None, :] * rows + row[:, :, None], val.to(tl.bfloat16),
                 mask=ok[:, None, :])
    elif ELEM == 2:
        w = tl.arange(0, 2)
        idx = (offs_c[None, :] * (rows // 8) + grp[:, None] * 4)[:, :, None, None] + \
            (w[:, None] + 2 * w[None, :])[None, None, :, :]   # [word, half]
        tl.store(q_ptr + idx, mx4_words(out, j[None, :, None], 1), mask=ok[:, :, None, None])
    elif PACK:    # rows % 32 == 0 for a column view: whole words, bytes little-endian by row
        o4 = tl.reshape(out.to(tl.uint32), (BR // 32, 8, 4, BC))
        shift = (tl.arange(0, 4) * 8).to(tl.uint32)
        words = tl.sum(o4 << shift[None, None, :, None], axis=2)                # [G, 8, BC]
        w8 = tl.arange(0, 8)
        widx = offs_c[None, None, :] * (rows // 4) + (grp[:, None] * 8 + w8[None, :])[:, :, None]
        tl.store(q_ptr.to(tl.pointer_type(tl.uint32)) + widx, words, mask=ok[:, None, :])
    else:
        tl.store(q_ptr + offs_c[None, None, :] * rows + row[:, :, None], out,
                 mask=ok[:, None, :])
    tl.store(s_ptr + offs_c[None, :] * (rows // 32) + grp[:, None], sbyte, mask=ok)
    return vmax                                       # block maxima, for the amax
