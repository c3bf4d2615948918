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
['REG']['ROW_SR']`` off) a stochastically rounded row view never shares a launch with a
column view: a dy pair runs as two launches of this kernel, the column view and then the SR
row view alone (``CONFIG['SPLIT']``, at every width since session 19); the combined path
stays, tested bit for bit, with each row's scale store as a scheduling fence.

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
from ._rht import finish_rotated
from ._utils import nvfp4_amax_of, nvfp4_scales_of, store_amaxes, tile_coords
from .quant_nvfp4_reg_views import (_load16, _load_one, _row_tile, _row_view, _row_words,
                                    _store_row_scales, _store_scale_rows, col_tile, tile_maxima)

__all__ = ["RHT_SIGN_MASK", "nvfp4_amax_reg_kernel", "nvfp4_rowcol_reg_kernel"]

# Bit j set where the SPEC §4 sign s_j is -1 (a compile-time constant of the kernels).
RHT_SIGN_MASK = sum(1 << j for j, s in enumerate(RHT_SIGNS_16) if s < 0)


@triton.jit
def nvfp4_rowcol_reg_kernel(x_ptr, amax_ptr, seed_ptr, qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr,
                            bc_ptr, rows, cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr,
                            NI: tl.constexpr, BC: tl.constexpr, EVEN: tl.constexpr,
                            ROW: tl.constexpr, ROW_SR: tl.constexpr, COL: tl.constexpr,
                            COL_RHT: tl.constexpr, COL_SR: tl.constexpr, SIGNS: tl.constexpr,
                            NUM_STAGES: tl.constexpr, ROW_EXP: tl.constexpr = False,
                            COL_EXP: tl.constexpr = False, y_ptr=None, PRO: tl.constexpr = 0,
                            n_part=0, NP: tl.constexpr = 0, ar_ptr=None, ac_ptr=None,
                            FAST_E2M1: tl.constexpr = False, PREFETCH: tl.constexpr = False,
                            PHILOX_WIDE: tl.constexpr = False, COL_UNCLAMPED: tl.constexpr = False):
    """Persistent loop over ``[16·NI, BC]`` tiles: row view (1x16, RNE or SR) and/or column
    view (optional RHT, RNE or SR). ``amax_ptr``: fp32 [2], the row view's and the column
    view's amax. Codes as int32 words (``qr [rows, cols/8]``, ``qc [cols, rows/8]``; ROW_EXP /
    COL_EXP: that view expanded instead, bf16 ``qr [rows, cols]`` / ``qc [cols, rows]``,
    ``tensor.py``), scale
    bytes ``sr [rows, cols/16]``, ``sc [cols, rows/16]``. SR 1: caller bytes ``br``/``bc``
    (x's shape / its transpose's), 2: in-kernel Philox from ``seed_ptr``. ``PRO`` > 0: the
    views of ``op(x, y)`` (``op_specs.PROLOGUES``), applied as the tiles load. ``NP`` > 0:
    ``amax_ptr`` holds the amax pass's ``n_part`` per-program maxima, and program 0 writes the
    views' amaxes to ``ar_ptr`` / ``ac_ptr`` (``store_amaxes``). ``FAST_E2M1``: E2M1 codes
    through the rounded value (``_e2m1.scaled_e2m1_code_fast``, the same codes).
    ``PREFETCH`` (a column view alone): the next tile's 16 raw tiles load before this tile's
    column view is quantized (:func:`_col_prefetch_loop`). ``PHILOX_WIDE``: the column view's
    Philox with each round's products as one wide multiply (the same words).
    ``COL_UNCLAMPED`` (a column view alone, with the RHT, whose ``amax_ptr`` slot 0 holds
    ``max|x|`` as the amax pass measured it: the caller vouches): where that is at most 2^125
    the RHT's input clamp is the identity, so the tiles rotate without it (two instructions an
    element fewer; the same bits); a larger value or an Inf takes the clamped tiles."""
    amax_r = nvfp4_amax_of(amax_ptr, 0, n_part, NP)
    amax_c = nvfp4_amax_of(amax_ptr, 1, n_part, NP)
    store_amaxes(amax_r, amax_c, ar_ptr, ac_ptr, ROW, COL, NP)
    s_enc6_r, s_dec_r = nvfp4_scales_of(amax_r)
    s_enc6_c, s_dec_c = nvfp4_scales_of(amax_c)
    seed_r = tl.load(seed_ptr) if ROW_SR == 2 else 0
    seed_c = tl.load(seed_ptr) + 1 if COL_SR == 2 else 0
    if COL_UNCLAMPED and COL and not ROW:
        if amax_r <= 4.253529586511731e37:                # 2^125: the clamp is the identity
            _col_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, rows,
                      cols, n_tc, n_tiles, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS, EVEN,
                      COL_EXP, FAST_E2M1, PRO, PHILOX_WIDE, PREFETCH, NUM_STAGES, False)
        else:
            _col_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, rows,
                      cols, n_tc, n_tiles, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS, EVEN,
                      COL_EXP, FAST_E2M1, PRO, PHILOX_WIDE, PREFETCH, NUM_STAGES, True)
    elif PREFETCH and COL and not ROW:
        _col_prefetch_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr,
                           rows, cols, n_tc, n_tiles, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS,
                           EVEN, COL_EXP, FAST_E2M1, PRO, PHILOX_WIDE)
    else:
        for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0),
                          num_stages=NUM_STAGES):
            r0, c0 = tile_coords(t, n_tc, 16 * NI, BC)
            if COL:
                raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
                col_tile(raw, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, r0, c0, rows, cols,
                         rows // 16, 0, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS, EVEN, COL_EXP,
                         FAST_E2M1, PHILOX_WIDE)
            if ROW:
                if COL and ROW_SR > 0:  # reloaded after the column view's stores (from L1), so
                    #                       the compiler cannot overlap the views' registers
                    raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
                r = r0 + 16 * tl.arange(0, NI)[:, None]
                blk = c0 // 16 + tl.arange(0, BC // 16)[None, :]
                sb = ()
                for jp in tl.static_range(8):
                    if ROW_SR == 2:
                        a0, b0, a1, b1 = _row_words(seed_r, r + 2 * jp, blk, cols)
                    else:
                        a0, b0, a1, b1 = 0, 0, 0, 0
                    if COL:
                        raw0, raw1 = raw[2 * jp], raw[2 * jp + 1]
                    else:               # a row view alone: two raw tiles live at a time, not 16
                        raw0 = _load_one(x_ptr, r0, c0, 2 * jp, rows, cols, NI, BC, IN_DTYPE, EVEN,
                                         y_ptr, PRO)
                        raw1 = _load_one(x_ptr, r0, c0, 2 * jp + 1, rows, cols, NI, BC, IN_DTYPE,
                                         EVEN, y_ptr, PRO)
                    s0 = _row_view(_row_tile(raw0, IN_DTYPE, NI, BC), s_enc6_r, s_dec_r, a0,
                                   b0, qr_ptr, br_ptr, r + 2 * jp, c0, rows, cols, NI, BC, ROW_SR,
                                   EVEN, ROW_EXP, FAST_E2M1)
                    s1 = _row_view(_row_tile(raw1, IN_DTYPE, NI, BC), s_enc6_r, s_dec_r,
                                   a1, b1, qr_ptr, br_ptr, r + 2 * jp + 1, c0, rows, cols, NI, BC,
                                   ROW_SR, EVEN, ROW_EXP, FAST_E2M1)
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
def _col_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, rows, cols, n_tc,
              n_tiles, IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr,
              COL_RHT: tl.constexpr, COL_SR: tl.constexpr, SIGNS: tl.constexpr,
              EVEN: tl.constexpr, COL_EXP: tl.constexpr, FAST_E2M1: tl.constexpr,
              PRO: tl.constexpr, PHILOX_WIDE: tl.constexpr, PREFETCH: tl.constexpr,
              NUM_STAGES: tl.constexpr, CLAMP: tl.constexpr):
    """A column view alone over the program's tiles (:func:`_col_prefetch_loop` where
    ``PREFETCH``), the RHT clamped or not (``CLAMP``, ``col_tile``'s)."""
    if PREFETCH:
        _col_prefetch_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr,
                           rows, cols, n_tc, n_tiles, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS,
                           EVEN, COL_EXP, FAST_E2M1, PRO, PHILOX_WIDE, CLAMP)
    else:
        for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0),
                          num_stages=NUM_STAGES):
            r0, c0 = tile_coords(t, n_tc, 16 * NI, BC)
            raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
            col_tile(raw, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, r0, c0, rows,
                     cols, rows // 16, 0, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS, EVEN,
                     COL_EXP, FAST_E2M1, PHILOX_WIDE, CLAMP)


@triton.jit
def _col_prefetch_loop(x_ptr, y_ptr, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, rows,
                       cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr, NI: tl.constexpr,
                       BC: tl.constexpr, COL_RHT: tl.constexpr, COL_SR: tl.constexpr,
                       SIGNS: tl.constexpr, EVEN: tl.constexpr, COL_EXP: tl.constexpr,
                       FAST_E2M1: tl.constexpr, PRO: tl.constexpr,
                       PHILOX_WIDE: tl.constexpr = False, CLAMP: tl.constexpr = True):
    """A column view alone, each program's next tile loaded before this tile is quantized (as
    the row kernel's ``PREFETCH``); past the last tile the last tile is loaded again (never
    stored), so no mask is needed. The grid never exceeds the tiles (``persistent_grid``).
    ``CLAMP``: :func:`~.quant_nvfp4_reg_views.col_tile`'s."""
    pid, step = tl.program_id(0), tl.num_programs(0)
    r0, c0 = tile_coords(tl.minimum(pid, n_tiles - 1), n_tc, 16 * NI, BC)
    raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
    for t in tl.range(pid, n_tiles, step, num_stages=1):
        r0_nx, c0_nx = tile_coords(tl.minimum(t + step, n_tiles - 1), n_tc, 16 * NI, BC)
        raw_nx = _load16(x_ptr, r0_nx, c0_nx, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
        col_tile(raw, s_enc6_c, s_dec_c, seed_c, bc_ptr, qc_ptr, sc_ptr, r0, c0, rows, cols,
                 rows // 16, 0, IN_DTYPE, NI, BC, COL_RHT, COL_SR, SIGNS, EVEN, COL_EXP,
                 FAST_E2M1, PHILOX_WIDE, CLAMP)
        raw = raw_nx
        r0, c0 = r0_nx, c0_nx


@triton.jit
def _maxima_loop(x_ptr, acc_r, acc_c, rows, cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr,
                 NI: tl.constexpr, BC: tl.constexpr, EVEN: tl.constexpr, PLAIN: tl.constexpr,
                 RHT: tl.constexpr, SIGNS: tl.constexpr, NUM_STAGES: tl.constexpr,
                 REVERSE: tl.constexpr, y_ptr, PRO: tl.constexpr, CLAMP: tl.constexpr,
                 PAIRS: tl.constexpr = False):
    """The program's tiles (persistent, from the last back when ``REVERSE``) into the running
    maxima of :func:`tile_maxima`."""
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        if REVERSE:
            t = n_tiles - 1 - t
        r0, c0 = tile_coords(t, n_tc, 16 * NI, BC)
        raw = _load16(x_ptr, r0, c0, rows, cols, NI, BC, IN_DTYPE, EVEN, y_ptr, PRO)
        acc_r, acc_c = tile_maxima(raw, acc_r, acc_c, IN_DTYPE, NI, BC, PLAIN, RHT, SIGNS, CLAMP,
                                   PAIRS)
    return acc_r, acc_c


@triton.jit
def nvfp4_amax_reg_kernel(x_ptr, amax_ptr, rows, cols, n_tc, n_tiles, IN_DTYPE: tl.constexpr,
                          NI: tl.constexpr, BC: tl.constexpr, EVEN: tl.constexpr,
                          ROW: tl.constexpr, COL: tl.constexpr, COL_RHT: tl.constexpr,
                          SIGNS: tl.constexpr, NUM_STAGES: tl.constexpr,
                          REVERSE: tl.constexpr = False, y_ptr=None, PRO: tl.constexpr = 0,
                          PARTIAL: tl.constexpr = False, UNCLAMPED: tl.constexpr = False,
                          PAIRS: tl.constexpr = False):
    """The amax pass in the same layout: ``amax_ptr[0] = max|x|`` (row view), ``[1]`` the
    column view's (after its RHT). NaN is skipped (it reads as 0); elementwise running maxima,
    one reduction and one atomic per program and view. ``PARTIAL``: no atomics, each program
    stores its two maxima at ``amax_ptr[2·pid]``, ``[2·pid + 1]`` (no zeroed buffer; the
    quantize pass reduces them, ``_utils.nvfp4_amax_of``). ``REVERSE``: the tiles from the last
    one back, so that the quantize pass, which starts at the first, finds them in L2.
    ``PRO`` > 0: of ``op(x, y)``, as :func:`nvfp4_rowcol_reg_kernel`.

    ``UNCLAMPED`` (column RHT, bf16/fp32 input): the RHT runs without its input clamp to
    ±2^125 (two instructions an element saved), and the program takes ``max|x|`` of its tiles
    beside it (one instruction, none where the row view takes it anyway). The clamp is the
    identity where that
    maximum is at most 2^125, so the rotated maxima are the same bits; a program whose tiles
    hold a larger value or an Inf (never a training tensor) runs them again with the clamp.
    ``PAIRS``: the RHT's last stage folded into pair maxima (``_rht.rht_pair_maxima``)."""
    acc_r = tl.zeros((NI, BC // 2), dtype=tl.float32)
    acc_c = tl.zeros((NI, BC // 2), dtype=tl.float32)
    CHECK: tl.constexpr = UNCLAMPED and COL and COL_RHT and IN_DTYPE != 2
    acc_r, acc_c = _maxima_loop(x_ptr, acc_r, acc_c, rows, cols, n_tc, n_tiles, IN_DTYPE, NI,
                                BC, EVEN, ROW or (COL and not COL_RHT) or CHECK,
                                COL and COL_RHT, SIGNS, NUM_STAGES, REVERSE, y_ptr, PRO,
                                not CHECK, PAIRS)
    amax_r = tl.max(tl.max(acc_r, axis=1), axis=0)
    if CHECK:
        if amax_r > 4.253529586511731e37:                  # 2^125 (or Inf): clamp after all
            acc_c = tl.zeros((NI, BC // 2), dtype=tl.float32)
            _, acc_c = _maxima_loop(x_ptr, acc_r, acc_c, rows, cols, n_tc, n_tiles, IN_DTYPE,
                                    NI, BC, EVEN, False, True, SIGNS, NUM_STAGES, REVERSE,
                                    y_ptr, PRO, True, PAIRS)
    amax_c = finish_rotated(tl.max(tl.max(acc_c, axis=1), axis=0), IN_DTYPE) if COL_RHT \
        else amax_r
    if PARTIAL:
        at = amax_ptr + 2 * tl.program_id(0)
        tl.store(at, amax_r)
        tl.store(at + 1, amax_c)
    else:
        if ROW:
            tl.atomic_max(amax_ptr, amax_r)
        if COL:
            tl.atomic_max(amax_ptr + 1, amax_c)
