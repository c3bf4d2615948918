"""The register layout's loads, views and stores, shared by the NVFP4 register kernels: the
dense ``quant_nvfp4_reg`` (a tensor's rows) and the grouped ``quant_nvfp4_grouped_reg`` (an MoE
layer's padded token rows).

A tile ``[16·NI, BC]`` is held as 16 tiles ``x_j`` (``x_j[i, ·]`` is row ``r0 + 16·i + j``),
bf16/fp16 packed as int32 words, all in one register layout, so that a column's 16-row block
(one group i) lies in one thread (``quant_nvfp4_reg``'s docstring has the layout and the
numerics). Here:

* loads: :func:`_load16` (the 16 raw tiles of a tensor's rows; :func:`_load_one` one of
  them, as a row view alone loads them), :func:`_half` (fp32 even or
  odd columns), :func:`_row_tile` (one raw tile's fp32 columns in order);
* the row view: :func:`_row_words` (Philox words, one Philox a block shared by a lane pair),
  :func:`_row_view` (1x16 blocks, codes or expanded values stored, scale bytes returned),
  :func:`_store_scale_rows` / :func:`_store_row_scales` (their scale bytes);
* the column view: :func:`_col_view` (per group and column a 16-value block in one thread,
  RHT done before), :func:`_join_halves` / :func:`_store_cols`, and :func:`col_tile`, which
  quantizes and stores a tile's column view (even columns, then odd ones);
* :func:`tile_maxima`: the amax passes' running maxima of ``|x|`` and ``|RHT(x)|``.

The Philox counter of a column view's block is ``c · cpr + group - gofs`` (a tensor's own:
``cpr = rows / 16``, ``gofs = 0``; a grouped view's expert tensor: its padded length / 16 and
first group), so one code path serves both kernels.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._rht import (bf16_halves, clamp_bf16_chunk, rht_butterfly, rht_pair_maxima,
                   rotated_blocks, round_bf16_pair)
from ._e2m1 import nvfp4_expanded_value, scaled_e2m1_code, scaled_e2m1_nibble
from ._philox import philox_words
from .quant_rowcol_reg import prologue_of
from ._utils import (NATIVE_CASTS, bf16_pair, bits_byte, max_abs, max_keep_nan,
                     nvfp4_block_scales, rotated_block_max, split_nan, stack_last)

__all__ = ["col_tile", "tile_maxima"]


@triton.jit
def _load_one(x_ptr, r0, c0, j, rows, cols, NI: tl.constexpr, BC: tl.constexpr,
              IN_DTYPE: tl.constexpr, EVEN: tl.constexpr, y_ptr=None, PRO: tl.constexpr = 0):
    """Raw tile j of a ``[16·NI, BC]`` tile (rows ``r0 + 16 i + j``): for bf16/fp16 the int32
    words ``[NI, BC/2]`` holding columns (2m, 2m+1) (the tile stays packed in registers), for
    fp32 the ``[NI, BC]`` values. ``PRO`` > 0: of ``op(x, y)`` (:func:`_prologue_words`),
    ``y`` read at the same offsets (by the two-tensor ops, 2 and 4)."""
    r = r0 + 16 * tl.arange(0, NI)[:, None] + j
    if IN_DTYPE == 0:
        offs = r * cols + c0 + tl.arange(0, BC)[None, :]
        mask = c0 + tl.arange(0, BC)[None, :] < cols
        x_at, y_at = x_ptr, y_ptr
    else:
        m = c0 // 2 + tl.arange(0, BC // 2)[None, :]
        offs = r * (cols // 2) + m
        mask = m < cols // 2
        x_at = x_ptr.to(tl.pointer_type(tl.int32))
        if PRO == 2 or PRO == 4:
            y_at = y_ptr.to(tl.pointer_type(tl.int32))
    if EVEN:
        out = tl.load(x_at + offs)
    else:           # a row view alone may have any number of rows
        out = tl.load(x_at + offs, mask=mask & (r < rows), other=0)
    if PRO == 2 or PRO == 4:
        if EVEN:
            yw = tl.load(y_at + offs)
        else:
            yw = tl.load(y_at + offs, mask=mask & (r < rows), other=0)
        out = _prologue_words(out, yw, PRO, IN_DTYPE)
    elif PRO > 0:
        out = _prologue_words(out, out, PRO, IN_DTYPE)
    return out


@triton.jit
def _prologue_words(xw, yw, PRO: tl.constexpr, IN_DTYPE: tl.constexpr):
    """``op(x, y)`` (``quant_rowcol_reg.prologue_of``: one rounding to the input dtype) of raw
    tiles, returned raw: fp32 values as they are, bf16/fp16 words unpacked into their two
    values and packed again (exact: each result is a value of the input dtype; a NaN stays
    NaN). bf16 on the GPU: both halves rounded and packed by one ``cvt.rn.bf16x2.f32``."""
    if IN_DTYPE == 0:
        out = prologue_of(xw, yw, PRO, IN_DTYPE)
    elif IN_DTYPE == 1 and NATIVE_CASTS:
        lo = prologue_of(_word_half(xw, 0, IN_DTYPE), _word_half(yw, 0, IN_DTYPE), PRO, IN_DTYPE,
                         False)
        hi = prologue_of(_word_half(xw, 1, IN_DTYPE), _word_half(yw, 1, IN_DTYPE), PRO, IN_DTYPE,
                         False)
        out = round_bf16_pair(lo, hi)
    else:
        lo = prologue_of(_word_half(xw, 0, IN_DTYPE), _word_half(yw, 0, IN_DTYPE), PRO, IN_DTYPE)
        hi = prologue_of(_word_half(xw, 1, IN_DTYPE), _word_half(yw, 1, IN_DTYPE), PRO, IN_DTYPE)
        if IN_DTYPE == 1:                   # bf16: the top half of each fp32
            out = bf16_pair(lo, hi)
        else:
            out = (hi.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) << 16) | \
                (lo.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)
    return out


@triton.jit
def _word_half(raw, H: tl.constexpr, IN_DTYPE: tl.constexpr):
    """fp32 values of the low (H = 0) or high (H = 1) halves of bf16/fp16 words."""
    if IN_DTYPE == 1:
        out = bf16_halves(raw)[H]
    else:
        bits = raw if H == 0 else raw >> 16
        out = bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return out


@triton.jit
def _load16(x_ptr, r0, c0, rows, cols, NI: tl.constexpr, BC: tl.constexpr,
            IN_DTYPE: tl.constexpr, EVEN: tl.constexpr, y_ptr=None, PRO: tl.constexpr = 0):
    """The 16 raw tiles (:func:`_load_one`) of rows ``r0 + 16 i + j``, j = 0..15."""
    xs = ()
    for j in tl.static_range(16):
        xs = xs + (_load_one(x_ptr, r0, c0, j, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr,
                             PRO),)
    return xs


@triton.jit
def _half(raw, H: tl.constexpr, IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr):
    """fp32 ``[NI, BC/2]`` of the tile's even (H = 0) or odd (H = 1) columns."""
    if IN_DTYPE == 0:
        even, odd = tl.split(tl.reshape(raw, (NI, BC // 2, 2)))
        out = even if H == 0 else odd
    else:
        out = _word_half(raw, H, IN_DTYPE)
    return out


@triton.jit
def _row_tile(raw, IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr):
    """fp32 ``[NI, BC]`` of one raw tile, columns in order."""
    if IN_DTYPE == 0:
        out = raw
    else:
        out = tl.reshape(tl.join(_half(raw, 0, IN_DTYPE, NI, BC), _half(raw, 1, IN_DTYPE, NI, BC)),
                         (NI, BC))
    return out


@triton.jit
def _row_words(seed, r, blk, cols):
    """Philox words for the row view of rows ``r`` and ``r + 1`` (``[NI, 1]``), blocks
    ``blk``: lane h (elements 8h..8h+7 of a block) needs bytes 8h..8h+7, words 2h and 2h+1,
    of each row's 128 bits. Lane h computes row r + h's bits and trades the two words the
    other lane needs (an xor across the pair): one Philox per block, not two. Returns
    ``(a0, b0, a1, b1)`` ``[NI, BC/16, 2]``: lane h's two words for row r, then row r + 1."""
    h = tl.arange(0, 2)[None, None, :]
    w0, w1, w2, w3 = tl.randint4x(seed, (r[:, :, None] + h) * (cols // 16) + blk[:, :, None])
    s_a = tl.where(h == 0, w2, w0)             # what the other lane needs from this one
    s_b = tl.where(h == 0, w3, w1)
    r_a = tl.xor_sum(s_a, axis=2)[:, :, None] ^ s_a
    r_b = tl.xor_sum(s_b, axis=2)[:, :, None] ^ s_b
    return (tl.where(h == 0, w0, r_a), tl.where(h == 0, w1, r_b),
            tl.where(h == 0, r_a, w2), tl.where(h == 0, r_b, w3))


@triton.jit
def _row_view(v, s_enc6, s_dec, wa, wb, q_ptr, b_ptr, r, c0, rows, cols,
              NI: tl.constexpr, BC: tl.constexpr, SR: tl.constexpr, EVEN: tl.constexpr,
              EXP: tl.constexpr = False, FAST: tl.constexpr = False):
    """Row view of tile ``v [NI, BC]`` (rows ``r [NI, 1]``): 1x16 blocks, one word a thread,
    stored (EXP: the expanded bf16 values instead, ``tensor.py``); returns the scale bytes
    ``[NI, BC/16]``. SR 2: ``wa``/``wb`` are this lane's two Philox words (``_row_words``).

    A block holding a NaN gets the NaN scale byte. Its codes are those of the block with NaN
    read as 0 (``split_nan``, the reference's); its expanded values are all NaN whatever they
    round to (the NaN scale multiplies each), so EXP skips the per-element NaN select and
    takes the block's maximum with NaN kept: NaN exactly where the block holds one (EXP 1;
    EXP 2: the select as the codes take it, ``quant_nvfp4.CONFIG["EXP_NAN_MAX"]`` off)."""
    if EXP == 1:
        v4 = tl.reshape(v, (NI, BC // 16, 2, 8))   # (i, block, lane half h, element k)
        vmax = max_keep_nan(max_keep_nan(tl.abs(v4), 3), 2)             # [NI, BC/16]
        bad = vmax != vmax
    else:
        v, nan = split_nan(v)
        v4 = tl.reshape(v, (NI, BC // 16, 2, 8))
        vmax = tl.max(tl.max(tl.abs(v4), axis=3), axis=2)
        bad = tl.max(tl.max(tl.reshape(nan, (NI, BC // 16, 2, 8)).to(tl.int32), axis=3),
                     axis=2) > 0
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad, 127, scale_byte).to(tl.uint8)          # the E4M3 NaN
    blk = c0 // 16 + tl.arange(0, BC // 16)[None, :]                    # [1, BC/16]
    ok = (r < rows) & (blk < cols // 16)                                # [NI, BC/16]
    h = tl.arange(0, 2)[None, None, :, None]
    k = tl.arange(0, 8)[None, None, None, :]
    if SR == 1:
        off = r[:, :, None, None] * cols + blk[:, :, None, None] * 16 + 8 * h + k
        rb = tl.load(b_ptr + off, mask=ok[:, :, None, None], other=0).to(tl.int32)
    elif SR == 2:
        w = tl.where(k < 4, wa[:, :, :, None], wb[:, :, :, None]).to(tl.uint32, bitcast=True)
        rb = ((w >> ((k % 4) * 8).to(tl.uint32)) & 255).to(tl.int32)
    else:
        rb = 0
    if EXP:                                     # the values alone: no codes (_e2m1)
        val = nvfp4_expanded_value(v4, enc[:, :, None, None], rb, scale_byte[:, :, None, None],
                                   SR > 0)
        val = tl.reshape(val, (NI, BC)).to(tl.bfloat16)
        ecol = c0 + tl.arange(0, BC)[None, :]
        if EVEN:
            tl.store(q_ptr + r * cols + ecol, val)
        else:
            tl.store(q_ptr + r * cols + ecol, val, mask=(r < rows) & (ecol < cols))
        return scale_byte
    codes = scaled_e2m1_code(v4, enc[:, :, None, None], rb, SR > 0, FAST)   # [NI, BC/16, 2, 8]
    words = tl.reshape(tl.sum(codes << (4 * k), axis=3), (NI, BC // 8))
    wcol = c0 // 8 + tl.arange(0, BC // 8)[None, :]
    if EVEN:
        tl.store(q_ptr + r * (cols // 8) + wcol, words)
    else:
        tl.store(q_ptr + r * (cols // 8) + wcol, words, mask=(r < rows) & (wcol < cols // 8))
    return scale_byte


@triton.jit
def _col_view(ys, s_enc6, s_dec, seed, b_ptr, r0, c, rows, cols, cpr, gofs, NI: tl.constexpr,
              W: tl.constexpr, RHT: tl.constexpr, SR: tl.constexpr, EXP: tl.constexpr = False,
              FAST: tl.constexpr = False, WIDE: tl.constexpr = False, maxima=None):
    """Column view of the 16 tiles ``ys [NI, W]`` (rotated already if RHT) of columns
    ``c [1, W]``: per (group i, column) one block of 16 in-thread values -> two uint32 words
    (``[NI, W, 2]``; EXP: the 16 expanded bf16 values as eight words ``[NI, W, 8]``,
    ``tensor.py``) and a scale byte (``[NI, W]``), returned. The Philox counter of a block is
    ``c · cpr + group - gofs`` (a tensor's own: ``cpr = rows / 16``, ``gofs = 0``; a grouped
    view's expert tensor: its padded length / 16 and first group, ``quant_nvfp4_grouped``);
    ``seed`` a scalar or one per group ``[NI, 1]``. ``WIDE``: the same Philox words with each
    round's products as one wide multiply. ``maxima``: the blocks' ``(vmax, bad)`` if given."""
    if maxima is not None:
        vmax, bad = maxima
    elif RHT:   # NaN fills its chunk: one output flags it; the codes are zeroed below
        vmax, bad = rotated_block_max(ys)
    else:
        bad = ys[0] != ys[0]
        vmax = tl.abs(tl.where(bad, 0.0, ys[0]))
        for j in tl.static_range(1, 16):
            nan_j = ys[j] != ys[j]
            bad = bad | nan_j
            vmax = tl.maximum(vmax, tl.abs(tl.where(nan_j, 0.0, ys[j])))
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)          # [NI, BC]
    scale_byte = tl.where(bad, 127, scale_byte).to(tl.uint8)
    grp = r0 // 16 + tl.arange(0, NI)[:, None]
    ok = (grp < rows // 16) & (c < cols)
    if SR == 2:
        # the counters in the values' register layout (vmax is NaN only where the block's
        # codes are zeroed anyway): without it Triton builds them in another layout and
        # moves every random byte through shared memory
        ctr = tl.where(vmax != vmax, 0, c * cpr + grp - gofs)
        w0, w1, w2, w3 = philox_words(seed, ctr, WIDE)
    lo = tl.zeros((NI, W), dtype=tl.int32)
    hi = tl.zeros((NI, W), dtype=tl.int32)
    vals = ()
    for j in tl.static_range(16):
        v = ys[j] if RHT else tl.where(ys[j] != ys[j], 0.0, ys[j])
        if SR == 1:
            rb = tl.load(b_ptr + c * rows + grp * 16 + j, mask=ok, other=0).to(tl.int32)
        elif SR == 2:
            rb = bits_byte(w0, w1, w2, w3, j)
        else:
            rb = 0
        if EXP:                                # NaN where the scale is the NaN byte
            vals = vals + (nvfp4_expanded_value(v, enc, rb, scale_byte, SR > 0),)
        else:
            if FAST:                           # the code shifted to its nibble as it rounds
                nib = scaled_e2m1_nibble(v, enc, rb, SR > 0, 4 * (j % 8))
            else:
                nib = scaled_e2m1_code(v, enc, rb, SR > 0, False) << (4 * (j % 8))
            if j < 8:
                lo = lo | nib
            else:
                hi = hi | nib
    if EXP:
        pairs = ()                             # bf16 pairs as words: [NI, W, 8]
        for m in tl.static_range(8):
            pairs = pairs + (bf16_pair(vals[2 * m], vals[2 * m + 1]),)
        out = stack_last(pairs, 8)
    else:
        if RHT:                                # a NaN chunk's codes are zeros
            lo = tl.where(bad, 0, lo)
            hi = tl.where(bad, 0, hi)
        out = tl.join(lo, hi)
    return out, scale_byte


@triton.jit
def _join_halves(a, b):
    """Even-column and odd-column tensors ``[NI, W, ...]`` -> ``[NI, 2W, ...]`` in column
    order (a register move: each thread holds both halves of its columns)."""
    if len(a.shape) == 2:
        out = tl.reshape(tl.join(a, b), (a.shape[0], 2 * a.shape[1]))
    else:
        out = tl.reshape(tl.permute(tl.join(a, b), (0, 1, 3, 2)),
                         (a.shape[0], 2 * a.shape[1], a.shape[2]))
    return out


@triton.jit
def _store_cols(q_ptr, s_ptr, words, scale_byte, r0, c0, rows, cols, NI: tl.constexpr,
                BC: tl.constexpr, EVEN: tl.constexpr, EXP: tl.constexpr = False):
    """The column view's words ``[NI, BC, 2]`` (EXP: ``[NI, BC, 8]``, bf16 pairs, ``q`` then
    bf16 ``[cols, rows]``) and scale bytes ``[NI, BC]`` of a tile: one store each (one layout
    change each: the store wants the groups i on neighbouring lanes)."""
    grp = r0 // 16 + tl.arange(0, NI)[:, None]
    c = c0 + tl.arange(0, BC)[None, :]
    if EXP:
        q_ptr = q_ptr.to(tl.pointer_type(tl.int32))
        widx = (c * (rows // 2) + 8 * grp)[:, :, None] + tl.arange(0, 8)[None, None, :]
    else:
        widx = (c * (rows // 8) + 2 * grp)[:, :, None] + tl.arange(0, 2)[None, None, :]
    if EVEN:
        tl.store(q_ptr + widx, words)
        tl.store(s_ptr + c * (rows // 16) + grp, scale_byte)
    else:
        ok = (grp < rows // 16) & (c < cols)
        tl.store(q_ptr + widx, words, mask=ok[:, :, None])
        tl.store(s_ptr + c * (rows // 16) + grp, scale_byte, mask=ok)


@triton.jit
def _store_scale_rows(s_ptr, scale_byte, r, c0, rows, cols, NI: tl.constexpr, BC: tl.constexpr,
                      EVEN: tl.constexpr):
    """One row tile's scale bytes ``[NI, BC/16]`` (rows ``r [NI, 1]``)."""
    blk = c0 // 16 + tl.arange(0, BC // 16)[None, :]
    if EVEN:
        tl.store(s_ptr + r * (cols // 16) + blk, scale_byte)
    else:
        tl.store(s_ptr + r * (cols // 16) + blk, scale_byte, mask=(r < rows) & (blk < cols // 16))


@triton.jit
def _store_row_scales(s_ptr, sb, r, c0, rows, cols, NI: tl.constexpr, BC: tl.constexpr,
                      EVEN: tl.constexpr):
    """The row view's 16 scale-byte tiles ``sb[j] [NI, BC/16]`` (rows ``r [NI, 1, 16]``: row
    ``r0 + 16 i + j`` of a tile) as one ``[NI, BC/16, 16]`` store: joined in registers (bit b
    of j on the b-th new axis), one layout change for the tile instead of one per j."""
    t = stack_last(sb, 16)                     # [NI, BC/16, 16]
    blk = c0 // 16 + tl.arange(0, BC // 16)[None, :, None]
    if EVEN:
        tl.store(s_ptr + r * (cols // 16) + blk, t)
    else:
        tl.store(s_ptr + r * (cols // 16) + blk, t, mask=(r < rows) & (blk < cols // 16))


@triton.jit
def col_tile(raw, s_enc6, s_dec, seed, b_ptr, q_ptr, s_ptr, r0, c0, rows, cols, cpr, gofs,
             IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr, RHT: tl.constexpr,
             SR: tl.constexpr, SIGNS: tl.constexpr, EVEN: tl.constexpr, EXP: tl.constexpr,
             FAST: tl.constexpr = False, WIDE: tl.constexpr = False,
             CLAMP: tl.constexpr = True, PAIRS: tl.constexpr = True):
    """The column view of one tile's 16 raw tiles (:func:`_col_view`'s arguments), quantized
    and stored: the even columns, then the odd ones (half the live values at a time), joined
    in registers for one store; bf16 RHT on pairs with ``PAIRS`` (``_rht.rotated_blocks``, the
    clamp on the raw words; ``CLAMP=False``: none, for a caller that knows max|x|). ``FAST``:
    codes through the rounded value (``_e2m1``); ``WIDE``: :func:`_col_view`'s."""
    if RHT and IN_DTYPE == 1 and CLAMP and PAIRS:
        raw = clamp_bf16_chunk(raw)
    outs = ()
    for hh in tl.static_range(2):
        vs = ()
        for j in tl.static_range(16):
            vs = vs + (_half(raw[j], hh, IN_DTYPE, NI, BC),)
        maxima = None
        if RHT and IN_DTYPE == 1 and PAIRS:      # rounded and maximized on pairs
            vs, vmax, bad = rotated_blocks(vs, IN_DTYPE, SIGNS)
            maxima = (vmax, bad)
        elif RHT:
            vs = rht_butterfly(vs, 16, IN_DTYPE, SIGNS, True, CLAMP)
        outs = outs + (_col_view(vs, s_enc6, s_dec, seed, b_ptr, r0,
                                 c0 + 2 * tl.arange(0, BC // 2)[None, :] + hh, rows, cols, cpr,
                                 gofs, NI, BC // 2, RHT, SR, EXP, FAST, WIDE, maxima),)
    _store_cols(q_ptr, s_ptr, _join_halves(outs[0][0], outs[1][0]),
                _join_halves(outs[0][1], outs[1][1]), r0, c0, rows, cols, NI, BC, EVEN, EXP)


@triton.jit
def tile_maxima(raw, acc_r, acc_c, IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr,
                PLAIN: tl.constexpr, RHT: tl.constexpr, SIGNS: tl.constexpr,
                CLAMP: tl.constexpr = True, PAIRS: tl.constexpr = False):
    """Running elementwise maxima ``[NI, BC/2]`` of one tile's 16 raw tiles: ``acc_r`` of
    ``|x|`` (PLAIN), ``acc_c`` of ``|RHT(x)|`` along the 16 rows (RHT), NaN read as 0, before
    the rounding to the input dtype (the caller finishes the maximum: ``_rht.finish_rotated``);
    ``PAIRS``: the last butterfly stage folded into pair maxima (``_rht.rht_pair_maxima``)."""
    for hh in tl.static_range(2):
        vs = ()
        for j in tl.static_range(16):
            vs = vs + (_half(raw[j], hh, IN_DTYPE, NI, BC),)
        if PLAIN:
            for j in tl.static_range(16):
                acc_r = max_abs(acc_r, vs[j])
        if RHT and PAIRS:                      # the rotated pairs' maxima (8 of 16 adds)
            ys = rht_pair_maxima(vs, 16, IN_DTYPE, SIGNS, CLAMP)
            for j in tl.static_range(8):
                acc_c = max_abs(acc_c, ys[j])
        elif RHT:
            ys = rht_butterfly(vs, 16, IN_DTYPE, SIGNS, False, CLAMP)
            for j in tl.static_range(16):
                acc_c = max_abs(acc_c, ys[j])
    return acc_r, acc_c
