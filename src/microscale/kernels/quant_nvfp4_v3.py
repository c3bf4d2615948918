"""The "v3" NVFP4 quantize pass and the amax pass of the "rows"/"v3" passes (``quant_nvfp4``).

* **amax pass** -- one read of x; each program reduces its tile to ``max|v|`` and folds it
  into a 2-slot fp32 buffer with an atomic max (slot 0: the row view, slot 1: the column
  view). With the RHT on, ``v`` is the rotated tile rounded to the input dtype, so the amax
  is the post-RHT one, as the spec requires.
* **v3 quantize pass** -- a program loops over ``[BR, BC]`` tiles and emits both views, never
  transposing in registers (Triton would pay a shared-memory layout change per reshape):

  * row view (x along its columns): the tile is read as ``[BR, BC/16, 16]``, blocks on the
    last axis; optional RHT on 16-chunks of each row, 1x16 blocks or 16x16 tiles (2D,
    weights); codes ``uint8[rows, cols/2]``, scales ``e4m3[rows, cols/16]``;
  * column view (xᵀ along x's rows, what wgrad consumes): the tile is read as
    ``[BR/16, 16, BC]`` (16-row groups) and rotated by ``Mᵀ @ X_g`` on the tensor cores;
    each (group, column) is one block, written straight into ``uint8[cols, rows/2]`` and
    ``e4m3[cols, rows/16]``.

  The 16 codes of a block are packed into two uint32 words with multiply-adds (the same
  bytes as ``pack_fp4``), so every block is stored with one 8-byte write.

Arithmetic per block and the non-finite rules: ``quant_nvfp4``'s docstring.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .quant_nvfp4_rows import _tile_max
from ._rht import rht_cols, rht_tile
from ._e2m1 import scaled_e2m1_code
from ._utils import (block_flag, max_abs, nvfp4_block_scales, nvfp4_global_scales, pack16,
                     select_byte, split_nan, tile_coords)

__all__ = ["nvfp4_amax_kernel", "nvfp4_v3_kernel"]


@triton.jit
def _tile_cols(a, BR: tl.constexpr, BC: tl.constexpr):
    """2D, column view: each tile's max of ``a`` [BR/16, BC], repeated on its 16 columns."""
    t = tl.max(tl.reshape(a, (BR // 16, BC // 16, 16)), axis=2)
    return tl.reshape(tl.broadcast_to(t[:, :, None], (BR // 16, BC // 16, 16)), (BR // 16, BC))


@triton.jit
def _load_rows(x_ptr, offs_r, c0, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """Row-view tile ``[BR, BC/16, 16]`` (blocks of 16 along x's columns), fp32."""
    blk = c0 // 16 + tl.arange(0, BC // 16)
    col = blk[:, None] * 16 + tl.arange(0, 16)[None, :]
    mask = (offs_r < rows)[:, None, None] & (blk < cols // 16)[None, :, None]
    v = tl.load(x_ptr + offs_r[:, None, None] * cols + col[None, :, :], mask=mask, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _load_cols(x_ptr, r0, offs_c, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """Column-view tile ``[BR/16, 16, BC]`` (blocks of 16 along x's rows), fp32."""
    row = r0 + tl.arange(0, BR // 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    mask = (row < rows)[:, :, None] & (offs_c < cols)[None, None, :]
    v = tl.load(x_ptr + row[:, :, None] * cols + offs_c[None, None, :], mask=mask, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _rot_rows(v, m_ptr, BR: tl.constexpr, BC: tl.constexpr, IN_DTYPE: tl.constexpr):
    """RHT of a row-view tile along its 16-blocks."""
    i16 = tl.arange(0, 16)
    m = tl.load(m_ptr + i16[:, None] * 16 + i16[None, :])
    y = rht_tile(tl.reshape(v, (BR, BC)), m, BR, BC, 16, IN_DTYPE)
    return tl.reshape(y, (BR, BC // 16, 16))


@triton.jit
def _rot_cols(v, m_ptr, BR: tl.constexpr, BC: tl.constexpr, IN_DTYPE: tl.constexpr):
    """RHT of a column-view tile along x's rows (``Mᵀ @ X`` per 16-row group)."""
    i16 = tl.arange(0, 16)
    mt = tl.load(m_ptr + i16[None, :] * 16 + i16[:, None])
    return rht_cols(v, mt, BR // 16, 16, BC, IN_DTYPE)


@triton.jit
def nvfp4_amax_kernel(x_ptr, amax_ptr, m_ptr, rows, cols, n_tc, n_tiles,
                      IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                       ROW: tl.constexpr, ROW_RHT: tl.constexpr,
                       COL: tl.constexpr, COL_RHT: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Each program loops over tiles keeping an elementwise running max (no cross-thread
    reduction inside the loop), reduces it once, and does one atomic per view."""
    acc_r = tl.zeros((BR // 16, 16, BC), dtype=tl.float32)
    acc_rr = tl.zeros((BR, BC // 16, 16), dtype=tl.float32)
    acc_c = tl.zeros((BR // 16, 16, BC), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_c = c0 + tl.arange(0, BC)
        xc = _load_cols(x_ptr, r0, offs_c, rows, cols, BR, BC)           # [BR/16, 16, BC]
        if ROW:
            if ROW_RHT:
                v = _rot_rows(_load_rows(x_ptr, r0 + tl.arange(0, BR), c0, rows, cols, BR, BC),
                              m_ptr, BR, BC, IN_DTYPE)
                acc_rr = max_abs(acc_rr, v)
            else:
                acc_r = max_abs(acc_r, xc)
        if COL:
            v = xc
            if COL_RHT:
                v = _rot_cols(xc, m_ptr, BR, BC, IN_DTYPE)
            acc_c = max_abs(acc_c, v)
    if ROW:
        if ROW_RHT:
            tl.atomic_max(amax_ptr, tl.max(tl.max(tl.max(acc_rr, axis=2), axis=1), axis=0))
        else:
            tl.atomic_max(amax_ptr, tl.max(tl.max(tl.max(acc_r, axis=2), axis=1), axis=0))
    if COL:
        tl.atomic_max(amax_ptr + 1, tl.max(tl.max(tl.max(acc_c, axis=2), axis=1), axis=0))


@triton.jit
def _row_view(x_ptr, s_enc6, s_dec, m_ptr, seed_ptr, q32_ptr, s_ptr, bits_ptr, r0, c0, rows, cols,
              IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, RHT: tl.constexpr,
              TWO_D: tl.constexpr, SR: tl.constexpr):
    """Row view of one tile: 16 codes of a block -> two uint32 words, one E4M3 scale byte."""
    offs_r = r0 + tl.arange(0, BR)
    blk = c0 // 16 + tl.arange(0, BC // 16)
    e = tl.arange(0, 16)
    v = _load_rows(x_ptr, offs_r, c0, rows, cols, BR, BC)
    if RHT:
        v = _rot_rows(v, m_ptr, BR, BC, IN_DTYPE)
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=2)                                    # [BR, BC/16]
    bad = block_flag(nan, 2).to(tl.int32)                               # NaN in the block
    if TWO_D:                                  # 16x16 tiles: rows r0.. are 16-aligned
        vmax = _tile_max(vmax, BR, BC)
        bad = _tile_max(bad, BR, BC)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # E4M3 NaN
    ok = (offs_r < rows)[:, None] & (blk < cols // 16)[None, :]
    if SR == 1:
        col = blk[:, None] * 16 + e[None, :]
        bits = tl.load(bits_ptr + offs_r[:, None, None] * cols + col[None, :, :],
                       mask=ok[:, :, None], other=0).to(tl.int32)
    elif SR == 2:
        w0, w1, w2, w3 = tl.randint4x(tl.load(seed_ptr),
                                      offs_r[:, None] * (cols // 16) + blk[None, :])
        bits = select_byte(w0[:, :, None], w1[:, :, None], w2[:, :, None], w3[:, :, None],
                           e[None, None, :])
    else:
        bits = 0
    codes = scaled_e2m1_code(v, enc[:, :, None], bits, SR > 0)
    lo, hi = pack16(codes, e[None, None, :], 2)
    idx = offs_r[:, None] * (cols // 16) + blk[None, :]
    tl.store(q32_ptr + 2 * idx[:, :, None] + tl.arange(0, 2)[None, None, :], tl.join(lo, hi),
             mask=ok[:, :, None])
    tl.store(s_ptr + idx, scale_byte, mask=ok)


@triton.jit
def _col_view(x_ptr, s_enc6, s_dec, m_ptr, seed_ptr, q32_ptr, s_ptr, bits_ptr, r0, c0, rows, cols,
              IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, RHT: tl.constexpr,
              TWO_D: tl.constexpr, SR: tl.constexpr):
    """Column view of one tile (xᵀ quantized along x's rows), without any transpose: per
    16-row group g and column c, two uint32 words of codes and one scale byte. With TWO_D
    the scale is the 16x16 tile's (16 rows x 16 columns), so the result equals the
    transpose of the 2D row view (SPEC §3): a weight's dgrad view from the same read."""
    offs_c = c0 + tl.arange(0, BC)
    grp = r0 // 16 + tl.arange(0, BR // 16)
    j = tl.arange(0, 16)
    v = _load_cols(x_ptr, r0, offs_c, rows, cols, BR, BC)               # [G, 16, BC]
    if RHT:
        v = _rot_cols(v, m_ptr, BR, BC, IN_DTYPE)
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=1)                                    # [G, BC]
    bad = block_flag(nan, 1).to(tl.int32)
    if TWO_D:                                  # 16x16 tiles: columns c0.. are 16-aligned
        vmax = _tile_cols(vmax, BR, BC)
        bad = _tile_cols(bad, BR, BC)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # E4M3 NaN
    ok = (grp < rows // 16)[:, None] & (offs_c < cols)[None, :]
    if SR == 1:
        row = grp[:, None] * 16 + j[None, :]
        bits = tl.load(bits_ptr + offs_c[None, None, :] * rows + row[:, :, None],
                       mask=ok[:, None, :], other=0).to(tl.int32)
    elif SR == 2:
        w0, w1, w2, w3 = tl.randint4x(tl.load(seed_ptr) + 1,
                                      offs_c[None, :] * (rows // 16) + grp[:, None])
        bits = select_byte(w0[:, None, :], w1[:, None, :], w2[:, None, :], w3[:, None, :],
                           j[None, :, None])
    else:
        bits = 0
    codes = scaled_e2m1_code(v, enc[:, None, :], bits, SR > 0)
    lo, hi = pack16(codes, j[None, :, None], 1)
    idx = offs_c[None, :] * (rows // 16) + grp[:, None]
    tl.store(q32_ptr + 2 * idx[:, :, None] + tl.arange(0, 2)[None, None, :], tl.join(lo, hi),
             mask=ok[:, :, None])
    tl.store(s_ptr + idx, scale_byte, mask=ok)


@triton.jit
def nvfp4_v3_kernel(x_ptr, amax_ptr, m_ptr, seed_ptr,
                    qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr, bc_ptr, rows, cols, n_tc, n_tiles,
                    IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                    ROW: tl.constexpr, ROW_RHT: tl.constexpr, ROW_2D: tl.constexpr,
                    ROW_SR: tl.constexpr,
                    COL: tl.constexpr, COL_RHT: tl.constexpr, COL_2D: tl.constexpr,
                    COL_SR: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Persistent loop over ``[BR, BC]`` tiles: the row view and/or the column view, each
    read from x (no transpose). Same arguments as ``quant_nvfp4_rows.nvfp4_rows_kernel``."""
    s_enc6_r, s_dec_r = nvfp4_global_scales(amax_ptr)          # once per program, not per tile
    s_enc6_c, s_dec_c = nvfp4_global_scales(amax_ptr + 1)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        if ROW:
            _row_view(x_ptr, s_enc6_r, s_dec_r, m_ptr, seed_ptr, qr_ptr, sr_ptr, br_ptr, r0, c0,
                      rows, cols, IN_DTYPE, BR, BC, ROW_RHT, ROW_2D, ROW_SR)
        if COL:
            _col_view(x_ptr, s_enc6_c, s_dec_c, m_ptr, seed_ptr, qc_ptr, sc_ptr, bc_ptr, r0, c0,
                      rows, cols, IN_DTYPE, BR, BC, COL_RHT, COL_2D, COL_SR)
