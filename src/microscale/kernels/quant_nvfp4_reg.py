"""NVFP4 row + column quantization with a column's 16-row block in one thread's registers.

What a linear layer asks of an activation or gradient x ``[rows, cols]`` (SPEC §2, §4, §5):

* the row view (fprop/dgrad operand): 1x16 blocks along ``cols``, RNE (x) or SR (dy);
* the column view (wgrad operand, stored transposed): 1x16 blocks along ``rows``, each 16-row
  chunk of a column rotated by the 16-point RHT first, RNE (x) or SR (dy).

Layout
======
A program owns a ``[16·NI, BC]`` tile and loads it as 16 tiles ``x_j``: ``x_j[i, ·]`` is row
``r0 + 16·i + j``. For bf16/fp16 a tile stays packed, as int32 words ``[NI, BC/2]`` (columns
2m and 2m+1 in one word: 64 registers for the whole tile); fp32 is loaded as is. All 16 have
the same register layout (a thread holds 8 consecutive columns of one i: a 16-byte load per
j), so an expression that combines them is elementwise and never leaves the thread. With the
defaults (NI = 16, BC = 64, 4 warps) a thread holds 16 rows x 8 columns of the tile, and

* **column view**: the block (16 rows of one column) is the 16 values ``x_j[i, c]`` of one
  thread. Its max is 15 in-thread maxima; the RHT is the Walsh-Hadamard butterfly across the
  16 tiles (4 stages of 16 adds); the 16 codes pack into two uint32 words with shifts
  (``word0 = Σ_{j<8} code_j << 4j``): no shuffle, no transpose. It runs on the even columns,
  then the odd ones (the low and high halves of the words), so half the tile is unpacked at a
  time; the two halves are joined in registers and stored once (one shared-memory layout
  change: the store wants neighbouring groups i on neighbouring lanes);
* **row view**: tile ``x_j`` is 16-row-spaced rows of x in the ordinary layout: a block is 16
  columns, 8 in each of two neighbouring lanes (one shuffle for its max), and a thread's 8
  codes are one uint32 word. The 16 tiles' scale bytes are joined in registers and stored
  once per tile.

SR of the row view: a block's 128 Philox bits are split between its two lanes. Each lane of
the pair computes one of two neighbouring rows' bits and trades the two words the other lane
needs (an xor across the pair): one Philox per block, not two. With row SR the combined
kernel still needs more than 255 registers (ptxas spills, ~180 bytes a thread) and ran the dy
pair 2.5x slower than the rows pass (H100, session 7), so by default (``quant_nvfp4.CONFIG
['REG']['ROW_SR']`` off) a stochastically rounded row view goes to the rows pass; the kernel
keeps the path, tested bit for bit, with each row's scale store as a scheduling fence.

The older passes (``quant_nvfp4``) either transposed the tile through shared memory or put a
column block on 16 lanes, which made the RHT a tensor-core dot with its layout changes and
the packing a cross-lane sum: 124 (x pair) and 175 (dy pair) static SASS instructions per
element of their tile, against 57 here for the x pair (``benchmarks/sass_offline.py``).

Measured (H100, graph-replayed, bf16 16384x3072, amax given): x pair (row RNE + column RHT)
181 µs against the rows pass's 251; a column view with the RHT, its amax pass included,
148 against 217 µs; a row view 94 against 116 µs (``benchmarks/results/
h100_20261125_session7/``).

Numerics
========
Bit-identical with the reference (``quant.nvfp4``) and the other passes, Philox streams
included (counter ``r·cols/16 + block`` keyed by the seed for the row view, ``c·rows/16 +
group`` keyed by seed + 1 for the column view; byte k of the 128 bits for element k):

* RHT: ``y_k = Σ_j x_j·M[j][k]`` with ``M = diag(s)·H/4``. Each product ``x_j·(±1/4)`` is the
  reference's own product (the input clamped to ±2^125 first, NaN kept); the butterfly adds
  them in a fixed tree order, the reference's matmul in its own. The sums agree whenever they
  are exact in fp32 (every chunk spanning fewer than ~16 binades), the same condition the
  tensor-core RHT of the older passes meets (``tests/test_kernels_quant.py``, RHT note). Then
  rounded to the input dtype (saturated for fp16).
* NaN reads as 0 and marks its block: scale byte 0x7F (the E4M3 NaN). After the RHT a NaN
  fills its whole chunk, so the rotated view flags the block by one output.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..hadamard import RHT_SIGNS_16
from ._rht import rht_butterfly
from ._utils import (abs_nan0, bf16_pair, bits_byte, nvfp4_block_scales, nvfp4_expanded,
                     nvfp4_global_scales, scaled_e2m1_code, split_nan, stack_last, tile_coords)

__all__ = ["RHT_SIGN_MASK", "nvfp4_rowcol_reg_kernel", "nvfp4_amax_reg_kernel"]

# Bit j set where the SPEC §4 sign s_j is -1 (a compile-time constant of the kernels).
RHT_SIGN_MASK = sum(1 << j for j, s in enumerate(RHT_SIGNS_16) if s < 0)


@triton.jit
def _load16(x_ptr, r0, c0, rows, cols, NI: tl.constexpr, BC: tl.constexpr,
            IN_DTYPE: tl.constexpr, EVEN: tl.constexpr):
    """The 16 raw tiles of rows ``r0 + 16 i + j``: for bf16/fp16 the int32 words
    ``[NI, BC/2]`` holding columns (2m, 2m+1) (the tile stays packed in registers), for fp32
    the ``[NI, BC]`` values."""
    r = r0 + 16 * tl.arange(0, NI)[:, None]
    if IN_DTYPE == 0:
        c = c0 + tl.arange(0, BC)[None, :]
        ptr = x_ptr + r * cols + c
        mask = c < cols
        step = cols
    else:
        m = c0 // 2 + tl.arange(0, BC // 2)[None, :]
        ptr = x_ptr.to(tl.pointer_type(tl.int32)) + r * (cols // 2) + m
        mask = m < cols // 2
        step = cols // 2
    xs = ()
    for j in tl.static_range(16):
        if EVEN:
            xs = xs + (tl.load(ptr + j * step),)
        else:       # row r + j: a row view alone may have any number of rows
            xs = xs + (tl.load(ptr + j * step, mask=mask & (r + j < rows), other=0),)
    return xs


@triton.jit
def _half(raw, H: tl.constexpr, IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr):
    """fp32 ``[NI, BC/2]`` of the tile's even (H = 0) or odd (H = 1) columns."""
    if IN_DTYPE == 0:
        even, odd = tl.split(tl.reshape(raw, (NI, BC // 2, 2)))
        out = even if H == 0 else odd
    elif IN_DTYPE == 1:                        # bf16: the top half of an fp32
        if H == 0:
            out = (raw << 16).to(tl.float32, bitcast=True)
        else:
            out = (raw & -65536).to(tl.float32, bitcast=True)
    else:
        bits = raw if H == 0 else raw >> 16
        out = bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
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
              EXP: tl.constexpr = False):
    """Row view of tile ``v [NI, BC]`` (rows ``r [NI, 1]``): 1x16 blocks, one word a thread,
    stored (EXP: the expanded bf16 values instead, ``tensor.py``); returns the scale bytes
    ``[NI, BC/16]``. SR 2: ``wa``/``wb`` are this lane's two Philox words (``_row_words``)."""
    v, nan = split_nan(v)
    v4 = tl.reshape(v, (NI, BC // 16, 2, 8))   # (i, block, lane half h, element k)
    vmax = tl.max(tl.max(tl.abs(v4), axis=3), axis=2)                  # [NI, BC/16]
    bad = tl.max(tl.max(tl.reshape(nan, (NI, BC // 16, 2, 8)).to(tl.int32), axis=3), axis=2)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # the E4M3 NaN
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
    codes = scaled_e2m1_code(v4, enc[:, :, None, None], rb, SR > 0)    # [NI, BC/16, 2, 8]
    if EXP:
        val = nvfp4_expanded(codes, scale_byte[:, :, None, None])
        val = tl.reshape(val, (NI, BC)).to(tl.bfloat16)
        ecol = c0 + tl.arange(0, BC)[None, :]
        if EVEN:
            tl.store(q_ptr + r * cols + ecol, val)
        else:
            tl.store(q_ptr + r * cols + ecol, val, mask=(r < rows) & (ecol < cols))
        return scale_byte
    words = tl.reshape(tl.sum(codes << (4 * k), axis=3), (NI, BC // 8))
    wcol = c0 // 8 + tl.arange(0, BC // 8)[None, :]
    if EVEN:
        tl.store(q_ptr + r * (cols // 8) + wcol, words)
    else:
        tl.store(q_ptr + r * (cols // 8) + wcol, words, mask=(r < rows) & (wcol < cols // 8))
    return scale_byte


@triton.jit
def _col_view(ys, s_enc6, s_dec, seed, b_ptr, r0, c, rows, cols, cpr, gofs, NI: tl.constexpr,
              W: tl.constexpr, RHT: tl.constexpr, SR: tl.constexpr, EXP: tl.constexpr = False):
    """Column view of the 16 tiles ``ys [NI, W]`` (rotated already if RHT) of columns
    ``c [1, W]``: per (group i, column) one block of 16 in-thread values -> two uint32 words
    (``[NI, W, 2]``; EXP: the 16 expanded bf16 values as eight words ``[NI, W, 8]``,
    ``tensor.py``) and a scale byte (``[NI, W]``), returned. The Philox counter of a block is
    ``c · cpr + group - gofs`` (a tensor's own: ``cpr = rows / 16``, ``gofs = 0``; a grouped
    view's expert tensor: its padded length / 16 and first group, ``quant_nvfp4_grouped``);
    ``seed`` a scalar or one per group ``[NI, 1]``."""
    if RHT:     # NaN fills its chunk: one output flags it; the codes are zeroed below
        bad = ys[0] != ys[0]
        vmax = tl.abs(ys[0])
        for j in tl.static_range(1, 16):
            vmax = tl.maximum(vmax, tl.abs(ys[j]))
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
        w0, w1, w2, w3 = tl.randint4x(seed, ctr)
    lo = tl.zeros((NI, W), dtype=tl.int32)
    hi = tl.zeros((NI, W), dtype=tl.int32)
    vals = ()
    for j in tl.static_range(16):
        if RHT:
            v = ys[j]
        else:
            v = tl.where(ys[j] != ys[j], 0.0, ys[j])
        if SR == 1:
            rb = tl.load(b_ptr + c * rows + grp * 16 + j, mask=ok, other=0).to(tl.int32)
        elif SR == 2:
            rb = bits_byte(w0, w1, w2, w3, j)
        else:
            rb = 0
        if EXP:                                # NaN where the scale is the NaN byte
            vals = vals + (nvfp4_expanded(scaled_e2m1_code(v, enc, rb, SR > 0), scale_byte),)
        elif j < 8:
            lo = lo | (scaled_e2m1_code(v, enc, rb, SR > 0) << (4 * j))
        else:
            hi = hi | (scaled_e2m1_code(v, enc, rb, SR > 0) << (4 * (j - 8)))
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
def nvfp4_rowcol_reg_kernel(x_ptr, amax_ptr, seed_ptr, qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr,
                            bc_ptr, rows, cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr,
                            NI: tl.constexpr, BC: tl.constexpr, EVEN: tl.constexpr,
                            ROW: tl.constexpr, ROW_SR: tl.constexpr, COL: tl.constexpr,
                            COL_RHT: tl.constexpr, COL_SR: tl.constexpr, SIGNS: tl.constexpr,
                            NUM_STAGES: tl.constexpr, ROW_EXP: tl.constexpr = False,
                            COL_EXP: tl.constexpr = False):
    """Persistent loop over ``[16·NI, BC]`` tiles: row view (1x16, RNE or SR) and/or column
    view (optional RHT, RNE or SR). ``amax_ptr``: fp32 [2], the row view's and the column
    view's amax. Codes as int32 words (``qr [rows, cols/8]``, ``qc [cols, rows/8]``; ROW_EXP /
    COL_EXP: that view expanded instead, bf16 ``qr [rows, cols]`` / ``qc [cols, rows]``,
    ``tensor.py``), scale
    bytes ``sr [rows, cols/16]``, ``sc [cols, rows/16]``. SR 1: caller bytes ``br``/``bc``
    (x's shape / its transpose's), 2: in-kernel Philox from ``seed_ptr``."""
    s_enc6_r, s_dec_r = nvfp4_global_scales(amax_ptr)
    s_enc6_c, s_dec_c = nvfp4_global_scales(amax_ptr + 1)
    seed_r = tl.load(seed_ptr) if ROW_SR == 2 else 0
    seed_c = tl.load(seed_ptr) + 1 if COL_SR == 2 else 0
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, 16 * NI, BC)
        raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN)
        if COL:                                # even columns, then odd: half the live values
            outs = ()
            for hh in tl.static_range(2):
                vs = ()
                for j in tl.static_range(16):
                    vs = vs + (_half(raw[j], hh, IN_DTYPE, NI, BC),)
                if COL_RHT:
                    vs = rht_butterfly(vs, 16, IN_DTYPE, SIGNS)
                outs = outs + (_col_view(vs, s_enc6_c, s_dec_c, seed_c, bc_ptr, r0,
                                         c0 + 2 * tl.arange(0, BC // 2)[None, :] + hh, rows,
                                         cols, rows // 16, 0, NI, BC // 2, COL_RHT, COL_SR,
                                         COL_EXP),)
            _store_cols(qc_ptr, sc_ptr, _join_halves(outs[0][0], outs[1][0]),
                        _join_halves(outs[0][1], outs[1][1]), r0, c0, rows, cols, NI, BC, EVEN,
                        COL_EXP)
        if ROW:
            if COL and ROW_SR > 0:  # reloaded after the column view's stores (from L1), so
                #                       the compiler cannot overlap the views' registers
                raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN)
            r = r0 + 16 * tl.arange(0, NI)[:, None]
            blk = c0 // 16 + tl.arange(0, BC // 16)[None, :]
            sb = ()
            for jp in tl.static_range(8):
                if ROW_SR == 2:
                    a0, b0, a1, b1 = _row_words(seed_r, r + 2 * jp, blk, cols)
                else:
                    a0, b0, a1, b1 = 0, 0, 0, 0
                s0 = _row_view(_row_tile(raw[2 * jp], IN_DTYPE, NI, BC), s_enc6_r, s_dec_r, a0,
                               b0, qr_ptr, br_ptr, r + 2 * jp, c0, rows, cols, NI, BC, ROW_SR,
                               EVEN, ROW_EXP)
                s1 = _row_view(_row_tile(raw[2 * jp + 1], IN_DTYPE, NI, BC), s_enc6_r, s_dec_r,
                               a1, b1, qr_ptr, br_ptr, r + 2 * jp + 1, c0, rows, cols, NI, BC,
                               ROW_SR, EVEN, ROW_EXP)
                if ROW_SR > 0:      # stored now: each store's layout change (a barrier) also
                    #                 keeps ptxas from overlapping the row pairs' Philox rounds,
                    #                 whose registers would not fit together
                    _store_scale_rows(sr_ptr, s0, r + 2 * jp, c0, rows, cols, NI, BC, EVEN)
                    _store_scale_rows(sr_ptr, s1, r + 2 * jp + 1, c0, rows, cols, NI, BC, EVEN)
                else:
                    sb = sb + (s0, s1)
            if ROW_SR == 0:
                _store_row_scales(sr_ptr, sb, r[:, :, None] + tl.arange(0, 16)[None, None, :],
                                  c0, rows, cols, NI, BC, EVEN)


@triton.jit
def nvfp4_amax_reg_kernel(x_ptr, amax_ptr, rows, cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr,
                          NI: tl.constexpr, BC: tl.constexpr, EVEN: tl.constexpr,
                          ROW: tl.constexpr, COL: tl.constexpr, COL_RHT: tl.constexpr,
                          SIGNS: tl.constexpr, NUM_STAGES: tl.constexpr):
    """The amax pass in the same layout: ``amax_ptr[0] = max|x|`` (row view), ``[1]`` the
    column view's (after its RHT). NaN is skipped (it reads as 0); elementwise running maxima,
    one reduction and one atomic per program and view."""
    acc_r = tl.zeros((NI, BC // 2), dtype=tl.float32)
    acc_c = tl.zeros((NI, BC // 2), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, 16 * NI, BC)
        raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN)
        for hh in tl.static_range(2):
            vs = ()
            for j in tl.static_range(16):
                vs = vs + (_half(raw[j], hh, IN_DTYPE, NI, BC),)
            if ROW or (COL and not COL_RHT):
                for j in tl.static_range(16):
                    acc_r = tl.maximum(acc_r, abs_nan0(vs[j]))
            if COL and COL_RHT:
                ys = rht_butterfly(vs, 16, IN_DTYPE, SIGNS)
                for j in tl.static_range(16):
                    acc_c = tl.maximum(acc_c, abs_nan0(ys[j]))
    amax_r = tl.max(tl.max(acc_r, axis=1), axis=0)
    if ROW:
        tl.atomic_max(amax_ptr, amax_r)
    if COL:
        if COL_RHT:
            tl.atomic_max(amax_ptr + 1, tl.max(tl.max(acc_c, axis=1), axis=0))
        else:
            tl.atomic_max(amax_ptr + 1, amax_r)
