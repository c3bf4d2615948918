"""Device code of the FP8 blockwise quantizer (:mod:`.quant_fp8`): its ``@triton.jit`` tile
functions and kernels, bit-exact with ``quant.fp8``.

``_fp8_block_kernel`` walks ``[BR, BC]`` tiles: a 1x128 row view (and, with COL, the 1x128
column view of the same tile) or 128x128 tiles (and, with COL, their exact transpose);
``_fp8_rowcol_sub_kernel`` writes a 1x128 pair from ``[SUB, BC]`` sub-tiles
(``quant_fp8.CONFIG['ROWCOL'] = "sub"``). The tile code (``_quant_1x128``, ``_quant_128x1``,
``_quant_128x128``, ``_scale_from_vmax``, ``_fp8_byte``) is shared with ``quant_many`` and
``quant_fp8_tensor``. Which kernel runs, its tiles and launch: :mod:`.quant_fp8`.

The scale rule mirrors ``fp8_scale_from_amax`` operation by operation::

    scale = fp8_max / vmax               (one IEEE fp32 division, tl.math.div_rn)
    vmax = 0 -> 1;  scale = inf -> the input dtype's max;  pow2: 2^floor(log2 scale)
    data  = cast_rne_satfinite(x * scale);   scale_inv = 1 / scale

Non-finite input (``check_finite=False``) as the reference: NaN is read as 0 and stored as the
NaN byte 0x7F; a block whose max is Inf gets scale 1 (its Inf saturates to ±fp8_max).

``amax`` (max|x| of the tensor) is folded in with an atomic max. Bytes per element for bf16
x: 2 read, 1 + 4/128 written per view.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._utils import exp2_int, floor_log2_sig, split_nan, tile_coords
from .quant_rowcol_reg import fp8_byte


@triton.jit
def _scale_from_vmax(vmax, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr, POW2: tl.constexpr):
    scale = tl.math.div_rn(FP8_MAX, vmax)
    scale = tl.where(vmax == 0.0, 1.0, scale)
    scale = tl.where(scale > 3.4028234663852886e38, IN_MAX, scale)          # inf
    scale = tl.where(vmax > 3.4028234663852886e38, 1.0, scale)     # Inf in the block: unit
    if POW2:
        fl, _ = floor_log2_sig(scale)
        scale = exp2_int(fl)
    return scale


@triton.jit
def _fp8_byte(y, E5M2: tl.constexpr, nan):
    """FP8 bytes of fp32 ``y`` (RNE, satfinite), the NaN byte 0x7F where ``nan``."""
    return fp8_byte(y, E5M2, nan, True)


@triton.jit
def _quant_1x128(v, nan, q_ptr, s_ptr, offs_r, offs_c, c0, nrows, ncols, R: tl.constexpr,
                 C: tl.constexpr, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr,
                 POW2: tl.constexpr, E5M2: tl.constexpr):
    """1x128 blocks along the last axis of view tile ``v`` [R, C]; store data and scale_inv."""
    v3 = tl.reshape(v, (R, C // 128, 128))
    vmax = tl.max(tl.abs(v3), axis=2)
    scale = _scale_from_vmax(vmax, FP8_MAX, IN_MAX, POW2)
    data = _fp8_byte(tl.reshape(v3 * scale[:, :, None], (R, C)), E5M2, nan)
    r_ok = offs_r < nrows
    tl.store(q_ptr + offs_r[:, None] * ncols + offs_c[None, :], data,
             mask=r_ok[:, None] & (offs_c < ncols)[None, :])
    sx = c0 // 128 + tl.arange(0, C // 128)
    tl.store(s_ptr + offs_r[:, None] * (ncols // 128) + sx[None, :], tl.math.div_rn(1.0, scale),
             mask=r_ok[:, None] & (sx < ncols // 128)[None, :])
    return vmax                                                 # block maxima, for the amax


@triton.jit
def _quant_128x1(x, nan, q_ptr, s_ptr, offs_r, offs_c, r0, rows, cols, BR: tl.constexpr,
                 BC: tl.constexpr, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr,
                 POW2: tl.constexpr, E5M2: tl.constexpr):
    """Column view of tile ``x`` [128, BC]: blocks of 128 along x's rows, stored as xᵀ
    (``data[cols, rows]``, ``scale_inv[cols, rows/128]``) without transposing in registers."""
    scale = _scale_from_vmax(tl.max(tl.abs(x), axis=0), FP8_MAX, IN_MAX, POW2)   # [BC]
    data = _fp8_byte(x * scale[None, :], E5M2, nan)
    c_ok = offs_c < cols
    tl.store(q_ptr + offs_c[None, :] * rows + offs_r[:, None], data,
             mask=(offs_r < rows)[:, None] & c_ok[None, :])
    tl.store(s_ptr + offs_c * (rows // 128) + r0 // 128, tl.math.div_rn(1.0, scale),
             mask=c_ok)                       # r0 < rows: the column view needs rows % 128 == 0


@triton.jit
def _fp8_block_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc, n_tiles,
                      IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr, POW2: tl.constexpr,
                      E5M2: tl.constexpr, MODE: tl.constexpr, COL: tl.constexpr,
                      NUM_STAGES: tl.constexpr):
    """MODE 0: 1x128 row view (+ column view if COL); MODE 1: 128x128 tiles (BR = 128).

    Each program loops over tiles keeping running block maxima and folds them into amax once
    at the end (the column view's maxima are the same numbers).
    """
    acc1 = tl.zeros((BR, BC // 128), dtype=tl.float32)        # running block maxima
    TR: tl.constexpr = BR // 128 if BR >= 128 else 1          # (MODE 1 only)
    acc2 = tl.zeros((TR, BC // 128), dtype=tl.float32)        # (no reduction in the loop)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_r = r0 + tl.arange(0, BR)
        offs_c = c0 + tl.arange(0, BC)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
        x, nan = split_nan(x.to(tl.float32))
        if MODE == 0:
            acc1 = tl.maximum(acc1, _quant_1x128(x, nan, qr_ptr, sr_ptr, offs_r, offs_c, c0, rows,
                                                 cols, BR, BC, FP8_MAX, IN_MAX, POW2, E5M2))
            if COL:
                _quant_128x1(x, nan, qc_ptr, sc_ptr, offs_r, offs_c, r0, rows, cols, BR, BC,
                             FP8_MAX, IN_MAX, POW2, E5M2)
        else:
            acc2 = tl.maximum(acc2, _quant_128x128(x, nan, qr_ptr, sr_ptr, qc_ptr, sc_ptr, offs_r,
                                                   offs_c, r0, c0, rows, cols, mask, BR, BC,
                                                   FP8_MAX, IN_MAX, POW2, E5M2, COL))
    if MODE == 0:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc1, axis=1), axis=0))
    else:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc2, axis=1), axis=0))


@triton.jit
def _fp8_rowcol_sub_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc,
                           n_tiles, BC: tl.constexpr, SUB: tl.constexpr, FP8_MAX: tl.constexpr,
                           IN_MAX: tl.constexpr, POW2: tl.constexpr, E5M2: tl.constexpr,
                           NUM_STAGES: tl.constexpr, PACK: tl.constexpr):
    """1x128 row and column views of ``[128, BC]`` tiles, walked as ``128/SUB`` sub-tiles of
    ``[SUB, BC]`` so that a thread holds SUB·BC/threads values instead of 128·BC/threads.

    Pass 1 quantizes each sub-tile's rows (the row view) and keeps the running column maxima;
    pass 2 reads the same sub-tiles again (from L1/L2: the tile was just read) and writes the
    column view with the tile's column scales. Same arithmetic per block as ``_quant_1x128``
    and ``_quant_128x1``, so the same bits; x is read from memory once, twice from cache.
    With PACK the column view's bytes are packed four rows to a uint32 before the transposing
    store (``[SUB/4, BC]`` words: a quarter of the elements through the layout conversion and
    4-byte stores instead of single bytes); same bytes in memory.
    """
    acc = tl.zeros((SUB, BC // 128), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, 128, BC)
        offs_c = c0 + tl.arange(0, BC)
        c_ok = offs_c < cols
        cmax = tl.zeros((BC,), dtype=tl.float32)
        for s in tl.static_range(128 // SUB):
            offs_r = r0 + s * SUB + tl.arange(0, SUB)
            mask = (offs_r < rows)[:, None] & c_ok[None, :]
            x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
            x, nan = split_nan(x.to(tl.float32))
            acc = tl.maximum(acc, _quant_1x128(x, nan, qr_ptr, sr_ptr, offs_r, offs_c, c0, rows,
                                               cols, SUB, BC, FP8_MAX, IN_MAX, POW2, E5M2))
            cmax = tl.maximum(cmax, tl.max(tl.abs(x), axis=0))
        scale = _scale_from_vmax(cmax, FP8_MAX, IN_MAX, POW2)                # [BC]
        for s in tl.static_range(128 // SUB):
            offs_r = r0 + s * SUB + tl.arange(0, SUB)
            mask = (offs_r < rows)[:, None] & c_ok[None, :]
            x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
            x, nan = split_nan(x.to(tl.float32))
            q = _fp8_byte(x * scale[None, :], E5M2, nan)
            if PACK:      # rows % 128 == 0 here, so whole words; bytes little-endian by row
                q4 = tl.reshape(q.to(tl.uint32), (SUB // 4, 4, BC))
                shift = (tl.arange(0, 4) * 8).to(tl.uint32)
                words = tl.sum(q4 << shift[None, :, None], axis=1)           # [SUB/4, BC]
                offs_w = (r0 + s * SUB) // 4 + tl.arange(0, SUB // 4)
                tl.store(qc_ptr.to(tl.pointer_type(tl.uint32)) + offs_c[None, :] * (rows // 4)
                         + offs_w[:, None], words,
                         mask=(offs_w < rows // 4)[:, None] & c_ok[None, :])
            else:
                tl.store(qc_ptr + offs_c[None, :] * rows + offs_r[:, None], q, mask=mask)
        tl.store(sc_ptr + offs_c * (rows // 128) + r0 // 128, tl.math.div_rn(1.0, scale),
                 mask=c_ok)
    tl.atomic_max(amax_ptr, tl.max(tl.max(acc, axis=1), axis=0))


@triton.jit
def _quant_128x128(x, nan, q_ptr, s_ptr, qt_ptr, st_ptr, offs_r, offs_c, r0, c0, rows, cols, mask,
                   BR: tl.constexpr, BC: tl.constexpr, FP8_MAX: tl.constexpr,
                   IN_MAX: tl.constexpr, POW2: tl.constexpr, E5M2: tl.constexpr,
                   COL: tl.constexpr):
    """128x128 tiles: one scale per tile, ``scale_inv[rows/128, cols/128]``. With COL also the
    exact transpose (SPEC §8: a weight's dgrad view), ``data[cols, rows]`` and
    ``scale_inv[cols/128, rows/128]``, from the same read."""
    x4 = tl.reshape(x, (BR // 128, 128, BC // 128, 128))
    tmax = tl.max(tl.max(tl.abs(x4), axis=3), axis=1)                 # [BR/128, BC/128]
    scale = _scale_from_vmax(tmax, FP8_MAX, IN_MAX, POW2)
    data = _fp8_byte(tl.reshape(x4 * scale[:, None, :, None], (BR, BC)), E5M2, nan)
    tl.store(q_ptr + offs_r[:, None] * cols + offs_c[None, :], data, mask=mask)
    ti = r0 // 128 + tl.arange(0, BR // 128)
    tj = c0 // 128 + tl.arange(0, BC // 128)
    s_inv = tl.math.div_rn(1.0, scale)
    s_ok = (ti < rows // 128)[:, None] & (tj < cols // 128)[None, :]
    tl.store(s_ptr + ti[:, None] * (cols // 128) + tj[None, :], s_inv, mask=s_ok)
    if COL:
        tl.store(qt_ptr + offs_c[:, None] * rows + offs_r[None, :], tl.trans(data),
                 mask=tl.trans(mask))
        tl.store(st_ptr + tj[None, :] * (rows // 128) + ti[:, None], s_inv, mask=s_ok)
    return tmax                                                 # tile maxima, for the amax
