"""The NVFP4 quantize pass in row form: every view is quantized as rows of a tile.

``quant_nvfp4`` (the "v3" pass) quantizes the column view (xᵀ, what wgrad reads) without ever
transposing: it loads the tile as 16-row groups and reduces, rotates and packs along a
non-minor axis. That avoids layout changes of fp32 tiles but makes every per-element step
awkward (the 16 codes of a block live in 16 different threads' registers, packing costs a
multiply-add per code and a cross-thread sum, the RHT is a batched 3-D dot).

This pass takes the opposite trade. It loads a ``[BR, BC]`` tile of x once (16-byte loads of
the input dtype) and

* row view: quantizes the tile's rows as they are;
* column view: transposes the *input-dtype* tile once (one shared-memory round trip of 2
  bytes per element for bf16) and quantizes the rows of ``tileᵀ``, which are x's columns.

So both views run the same code, :func:`quantize_rows`, with the block on the minor axis:
the block max is an in-thread reduction, the RHT a plain 2-D ``[R·C/16, 16] x [16, 16]`` dot,
two neighbouring codes are packed with one shift-or (``tl.split`` of element pairs), and a
thread stores its bytes contiguously. Arithmetic per element and per block is the reference's,
in its order (``quant_nvfp4`` documents it, with the non-finite rules: NaN reads as 0 and
makes its block's scale the E4M3 NaN), so the output is bit-identical to the reference and to
the v3 pass, including the Philox stream for stochastic rounding (the same
``(seed, block index)`` counter and byte selection), so a seed gives the same codes whichever
pass ran.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._rht import rht_tile
from ._e2m1 import nvfp4_expanded_value, scaled_e2m1_code
from ._utils import (block_flag, nvfp4_amax_of, nvfp4_block_scales, nvfp4_scales_of,
                     select_byte, split_nan, store_amaxes, tile_coords)

__all__ = ["quantize_rows", "nvfp4_rows_kernel"]


@triton.jit
def _tile_max(a, R: tl.constexpr, C: tl.constexpr):
    """Each 16x16 tile's max of the per-block ``a [R, C/16]``, repeated on the tile's 16 rows."""
    t = tl.max(tl.reshape(a, (R // 16, 16, C // 16)), axis=1)
    return tl.reshape(tl.broadcast_to(t[:, None, :], (R // 16, 16, C // 16)), (R, C // 16))


@triton.jit
def quantize_rows(v, s_enc6, s_dec, m_ptr, seed, q_ptr, s_ptr, bits_ptr, offs_r, c0, nrows, ncols,
                  IN_DTYPE: tl.constexpr, R: tl.constexpr, C: tl.constexpr, RHT: tl.constexpr,
                  TWO_D: tl.constexpr, SR: tl.constexpr, EXP: tl.constexpr = False,
                  st_ptr=None):
    """Quantize the fp32 tile ``v [R, C]``: rows ``offs_r`` and columns ``c0 ..`` of an
    ``[nrows, ncols]`` view, blocks of 16 along the columns. Stores packed codes
    ``uint8[nrows, ncols/2]`` (EXP: the expanded bf16 ``[nrows, ncols]`` instead, tensor.py)
    and E4M3 scale bytes ``[nrows, ncols/16]``. ``st_ptr`` (TWO_D, ``offs_r`` 16-aligned
    groups): also the transpose's scale bytes ``[ncols, nrows/16]``, each 16×16 tile's byte
    on its 16 rows there (``tensor.transpose_tile_scales``)."""
    if RHT:
        i16 = tl.arange(0, 16)
        m = tl.load(m_ptr + i16[:, None] * 16 + i16[None, :])
        v = rht_tile(v, m, R, C, 16, IN_DTYPE)
    v, nan = split_nan(v)                   # NaN reads as 0; its block's scale becomes NaN
    v3 = tl.reshape(v, (R, C // 16, 16))
    vmax = tl.max(tl.abs(v3), axis=2)                                  # [R, C/16]
    bad = block_flag(tl.reshape(nan, (R, C // 16, 16)), 2).to(tl.int32)
    if TWO_D:                               # 16x16 tiles: rows offs_r are 16-aligned groups
        vmax = _tile_max(vmax, R, C)
        bad = _tile_max(bad, R, C)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # the E4M3 NaN byte
    blk = c0 // 16 + tl.arange(0, C // 16)
    ok = (offs_r < nrows)[:, None] & (blk < ncols // 16)[None, :]
    e = tl.arange(0, 16)
    if SR == 1:
        col = blk[:, None] * 16 + e[None, :]
        bits = tl.load(bits_ptr + offs_r[:, None, None] * ncols + col[None, :, :],
                       mask=ok[:, :, None], other=0).to(tl.int32)
    elif SR == 2:
        w0, w1, w2, w3 = tl.randint4x(seed, offs_r[:, None] * (ncols // 16) + blk[None, :])
        bits = select_byte(w0[:, :, None], w1[:, :, None], w2[:, :, None], w3[:, :, None],
                           e[None, None, :])
    else:
        bits = 0
    if EXP:                                 # the values alone: no codes (_e2m1)
        val = nvfp4_expanded_value(v3, enc[:, :, None], bits, scale_byte[:, :, None], SR > 0)
        val = tl.reshape(val, (R, C))
        ecol = c0 + tl.arange(0, C)
        tl.store(q_ptr + offs_r[:, None] * ncols + ecol[None, :], val.to(tl.bfloat16),
                 mask=(offs_r < nrows)[:, None] & (ecol < ncols)[None, :])
    else:
        codes3 = scaled_e2m1_code(v3, enc[:, :, None], bits, SR > 0)  # [R, C/16, 16]
        codes = tl.reshape(codes3, (R, C // 2, 2))
        lo, hi = tl.split(codes)                                       # elements 2j, 2j+1
        byte = (lo | (hi << 4)).to(tl.uint8)
        bcol = c0 // 2 + tl.arange(0, C // 2)
        tl.store(q_ptr + offs_r[:, None] * (ncols // 2) + bcol[None, :], byte,
                 mask=(offs_r < nrows)[:, None] & (bcol < ncols // 2)[None, :])
    tl.store(s_ptr + offs_r[:, None] * (ncols // 16) + blk[None, :], scale_byte, mask=ok)
    if st_ptr is not None:
        _store_tile_scales_t(st_ptr, scale_byte, offs_r, blk, nrows, ncols, R, C)


@triton.jit
def _store_tile_scales_t(st_ptr, scale_byte, offs_r, blk, nrows, ncols, R: tl.constexpr,
                         C: tl.constexpr):
    """The transposed tensor's scale bytes of this tile's 16×16 tiles: tile ``(a, b)``'s byte
    (the same on its 16 rows of ``scale_byte [R, C/16]``) at rows ``16·blk_b + k`` (k < 16)
    and column ``offs_r_a / 16`` of ``[ncols, nrows/16]``."""
    tiles = tl.max(tl.reshape(scale_byte, (R // 16, 16, C // 16)), axis=1)   # [R/16, C/16]
    rt = tl.max(tl.reshape(offs_r // 16, (R // 16, 16)), axis=1)             # [R/16]
    k = tl.arange(0, 16)
    row_t = blk[None, :, None] * 16 + k[None, None, :]                        # [1, C/16, 16]
    at = row_t * (nrows // 16) + rt[:, None, None]
    ok = (rt < nrows // 16)[:, None, None] & (blk < ncols // 16)[None, :, None]
    tl.store(st_ptr + at, tl.broadcast_to(tiles[:, :, None], (R // 16, C // 16, 16)), mask=ok)


@triton.jit
def nvfp4_rows_kernel(x_ptr, amax_ptr, m_ptr, seed_ptr,
                      qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr, bc_ptr, rows, cols, n_tc, n_tiles,
                      IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      ROW: tl.constexpr, ROW_RHT: tl.constexpr, ROW_2D: tl.constexpr,
                      ROW_SR: tl.constexpr,
                      COL: tl.constexpr, COL_RHT: tl.constexpr, COL_2D: tl.constexpr,
                      COL_SR: tl.constexpr, NUM_STAGES: tl.constexpr,
                      ROW_EXP: tl.constexpr = False, COL_EXP: tl.constexpr = False,
                      n_part=0, NP: tl.constexpr = 0, ar_ptr=None, ac_ptr=None):
    """Persistent loop over ``[BR, BC]`` tiles: one load, the row view and/or the column view
    (the transposed tile). Same arguments as ``quant_nvfp4_v3.nvfp4_v3_kernel``, plus
    ROW_EXP / COL_EXP: that view written expanded (bf16, ``tensor.py``), and the amax pass's
    per-program maxima as ``quant_nvfp4_reg.nvfp4_rowcol_reg_kernel`` takes them (``NP``)."""
    amax_r = nvfp4_amax_of(amax_ptr, 0, n_part, NP)
    amax_c = nvfp4_amax_of(amax_ptr, 1, n_part, NP)
    store_amaxes(amax_r, amax_c, ar_ptr, ac_ptr, ROW, COL, NP)
    s_enc6_r, s_dec_r = nvfp4_scales_of(amax_r)
    s_enc6_c, s_dec_c = nvfp4_scales_of(amax_c)
    seed_r = tl.load(seed_ptr) if ROW_SR == 2 else 0
    seed_c = tl.load(seed_ptr) + 1 if COL_SR == 2 else 0
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_r = r0 + tl.arange(0, BR)
        offs_c = c0 + tl.arange(0, BC)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
        if ROW:
            quantize_rows(x.to(tl.float32), s_enc6_r, s_dec_r, m_ptr, seed_r, qr_ptr, sr_ptr,
                          br_ptr, offs_r, c0, rows, cols, IN_DTYPE, BR, BC, ROW_RHT, ROW_2D, ROW_SR,
                          ROW_EXP)
        if COL:
            quantize_rows(tl.trans(x).to(tl.float32), s_enc6_c, s_dec_c, m_ptr, seed_c, qc_ptr,
                          sc_ptr, bc_ptr, offs_c, r0, cols, rows, IN_DTYPE, BC, BR, COL_RHT,
                          COL_2D, COL_SR, COL_EXP)
