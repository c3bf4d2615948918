"""Row + column quantization with the whole tile in registers: FP8 1x128 blockwise and MXFP8.

Both kernels write the two views a linear layer needs of an activation or gradient x
``[rows, cols]`` (multiples of 128) from one read, bit-exact with ``quant.fp8`` / ``quant.mx``:
the row view (blocks along ``cols``: ``data[rows, cols]``) and the column view (blocks along
``rows``, stored transposed: ``data[cols, rows]``), with their scales.

* FP8 blockwise (SPEC §8, DeepSeek-V3): 1x128 blocks both ways, fp32 ``scale_inv`` per block.
* MXFP8 (SPEC §7): 1x32 blocks both ways, one UE8M0 byte per block, E4M3 or E5M2 elements.

Layout
======
A program owns a ``[128, 128]`` tile and loads it as ``[128/G, G, 128]``: element
``(i, j, c)`` is row ``r0 + G·i + j``. Triton's coalescing gives the contiguous axis ``c`` 8
lanes × 16 values and the strided axis ``i`` the other 4 lanes and the warps (4 lanes × 4
warps, twice over, with the default 4 warps), and leaves ``j`` to each thread's registers: the
axis that comes *after* ``i`` (ties between non-contiguous axes go to the lower index first).
So a thread holds G = 4 *consecutive* rows of 16 columns, and

* the row view is the usual one: 16 bytes of a row per thread, a 16-byte store;
* the column view packs its thread's 4 bytes of a column (rows ``G·i .. G·i+3``) into one
  little-endian uint32 with shifts inside the thread -- no shuffles -- and stores ``[32, 128]``
  words, i.e. each column's 128 bytes, after one shuffle through shared memory of 16 KB.

MXFP8's 32-blocks are views of the same registers: a row block is 16 values of two
neighbouring lanes, a column block 8 consecutive values of i (lanes and warps) times the 4 of j.
Its kernel also takes ``[BR, 128]`` tiles with BR 32 or 64 (the column blocks need 32 whole
rows): fewer values a thread, so more programs fit an SM (``quant_mx.CONFIG['BR_reg']``), and
``[BR, 64]`` ones (``['BC_reg']``: with one warp a column block stays inside the warp).

Scales without a division
=========================
For power-of-two FP8 scales (``pow2_scales=True``, every preset) the rule
``2^floor(log2(fl(fp8_max / vmax)))`` is read off vmax's bits: with ``fp8_max = 1.75·2^E``
(448: E = 8, 57344: E = 15) and ``vmax = m·2^e``, the quotient is ``(1.75/m)·2^(E-e)``, so the
exponent is ``E - e`` when ``m ≤ 1.75`` and ``E - e - 1`` otherwise (the rounded quotient never
reaches the next power of two: the nearest ``m`` above 1.75 gives ``1 - 3.4e-8``, which rounds
below 1). An exponent ≥ 128 is the division's overflow (the spec then uses the input dtype's
max, ``2^127`` for fp32/bf16, ``2^15`` for fp16); zero and subnormal vmax land there too,
before zero and Inf take the unit scale. ``scale_inv = 2^-n`` is exact (subnormal at n = 127).
This replaces an IEEE division, a log2 and an exp2 per scale -- per thread, 16 column scales
and 4 row scales a tile -- with ~10 integer operations. (MX exponents never divided.)

NaN and Inf
===========
On the GPU the maxima use the hardware max, which drops NaN (as the reference's NaN → 0 does),
and the satfinite conversion saturates ±Inf. A NaN element times its scale is the canonical NaN,
which the conversion turns into 0x7F, the reference's NaN byte, for either sign of the input
(``test_gpu_rowcol_reg_exact``, H100): so the kernels skip the per-byte select by default
(``NAN_SEL`` off; on, it costs ~9 SASS instructions per element and 1.2-1.6x the time). The
interpreter keeps the reference's NaN → 0 and the explicit byte.

Measured (H100, graph-replayed, 16384x768 / 16384x3072 bf16, copy rate 3.0 TB/s): FP8 33.0 /
98.3 µs (``quant_fp8``'s sub-tiled kernel: 52.2 / 169.2), MXFP8 36.4 / 108.8 µs
(``quant_mx``'s kernel: 52.2 / 163.1); the 125m training step with both pairs: fp8_blockwise
0.73x -> 0.85x of bf16, mxfp8 0.65x -> 0.70x (benchmarks/results/h100_20261125_session6/).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._utils import (NATIVE_CASTS, e4m3_byte, e4m3_value, e5m2_byte, exp2_int, mx_exponent,
                     round_to_input_dtype, tile_coords)

__all__ = ["fp8_byte", "fp8_value", "mx8_expanded", "pow2_scale", "prologue_of",
           "prologue_value", "fp8_rowcol_reg_kernel", "mx8_rowcol_reg_kernel", "mx8_tile",
           "pow2_exponents", "tile_rows"]


def pow2_exponents(fp8_max: float, in_max: float) -> tuple[int, int]:
    """``(E, IN_EXP)``: fp8_max = 1.75·2^E; IN_EXP = floor(log2 of the input dtype's max)."""
    exp = {448.0: 8, 57344.0: 15}[fp8_max]
    return exp, (15 if in_max == 65504.0 else 127)


@triton.jit
def pow2_scale(vmax, FP8_EXP: tl.constexpr, IN_EXP: tl.constexpr):
    """``(scale, scale_inv)`` for fp32 block maxima ``vmax`` ≥ 0 (never NaN), exactly
    ``fp8_scale_from_amax(vmax, pow2_scales=True)`` and its inverse, without a division."""
    b = vmax.to(tl.int32, bitcast=True)
    n = FP8_EXP + 127 - (b >> 23) - ((b & 0x7FFFFF) > 0x600000).to(tl.int32)
    n = tl.where(n >= 128, IN_EXP, n)                      # overflow (zero, subnormal too)
    n = tl.where((b - 1).to(tl.uint32, bitcast=True) >= 0x7F7FFFFF, 0, n)   # 0 or Inf: unit
    return ((n + 127) << 23).to(tl.float32, bitcast=True), exp2_int(-n)


@triton.jit
def fp8_byte(y, E5M2: tl.constexpr, nan, NAN_SEL: tl.constexpr):
    """FP8 bytes of fp32 ``y`` (RNE, satfinite); the NaN byte 0x7F where ``nan`` if
    ``NAN_SEL`` (always in the interpreter, whose casts are emulated)."""
    if E5M2:
        out = e5m2_byte(y)
    else:
        out = e4m3_byte(y)
    if NAN_SEL or not NATIVE_CASTS:
        out = tl.where(nan, 127, out)
    return out.to(tl.uint8)


@triton.jit
def prologue_value(a_in, b_ptr, offs, mask, PRO: tl.constexpr, IN_DTYPE: tl.constexpr):
    """``x = op(a, b)`` of loaded input values ``a_in`` (and ``b`` at ``b_ptr + offs``) as
    fp32, rounded once to the input dtype (:func:`prologue_of`)."""
    b = 0.0
    if PRO == 2 or PRO == 4:
        if mask is None:
            b = tl.load(b_ptr + offs).to(tl.float32)
        else:
            b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return prologue_of(a_in.to(tl.float32), b, PRO, IN_DTYPE)


@triton.jit
def prologue_of(a, b, PRO: tl.constexpr, IN_DTYPE: tl.constexpr, ROUND: tl.constexpr = True):
    """``op(a, b)`` of fp32 input values, rounded once to the input dtype: PRO 1 ``a²``, 2
    ``a·b``, 3 ``relu(a)²``, 4 ``a · (2 relu(b))`` where ``b > 0``, else +0
    (``op_specs.PROLOGUES``; ``b`` unused by 1 and 3). The product of two bf16/fp16 values is
    exact in fp32 (and ``2 b`` is exact, or Inf as in the input dtype), so this is the one
    correctly rounded multiply eager torch and Inductor compute (NaN kept, overflow to Inf as
    theirs); the relu is a select that keeps NaN, as ``torch.relu``. ``ROUND`` False: the
    fp32 value before that rounding (the caller rounds it with the hardware conversion)."""
    if PRO == 1:
        p = a * a
    elif PRO == 3:
        r = tl.where(a <= 0.0, 0.0, a)
        p = r * r
    elif PRO == 2:
        p = a * b
    elif IN_DTYPE == 2:                     # 2b overflows fp16 before fp32
        p = a * round_to_input_dtype(b * 2.0, IN_DTYPE)
    else:                                   # fp32 and bf16 overflow together
        p = a * (b * 2.0)
    if PRO == 4:
        p = tl.where(b <= 0.0, 0.0, p)
    if not ROUND or IN_DTYPE == 0:
        out = p
    elif NATIVE_CASTS:                      # the hardware conversion keeps NaN a NaN
        out = round_to_input_dtype(p, IN_DTYPE)
    else:                                   # the integer rounding could carry a NaN into Inf
        out = tl.where(p != p, p, round_to_input_dtype(p, IN_DTYPE))
    return out


@triton.jit
def tile_rows(r0, G: tl.constexpr, BR: tl.constexpr):
    """``[BR/G, G]`` row numbers of a tile's registers: ``r0 + G·i + j``."""
    return r0 + G * tl.arange(0, BR // G)[:, None] + tl.arange(0, G)[None, :]


@triton.jit
def _load_tile(x_ptr, r0, c0, cols, G: tl.constexpr, y_ptr, PRO: tl.constexpr,
               IN_DTYPE: tl.constexpr, BR: tl.constexpr = 128, src=None,
               GATHER: tl.constexpr = False, BC: tl.constexpr = 128):
    """The ``[BR/G, G, BC]`` view of tile (r0, c0) (``BR`` rows) as fp32, its NaN mask, and
    the offsets; PRO > 0: of ``op(x, y)`` (:func:`prologue_value`) instead of x. ``GATHER``:
    the tile's rows are x's rows ``src`` (``[BR/G, G]``, -1: a row of zeros), and the offsets
    returned are theirs (a grouped tensor's padded layout read without writing it)."""
    if GATHER:
        mask = (src >= 0)[:, :, None] & (tl.arange(0, BC) < BC)[None, None, :]
        offs = tl.maximum(src, 0)[:, :, None] * cols + (c0 + tl.arange(0, BC)[None, None, :])
        x_in = tl.load(x_ptr + offs, mask=mask, other=0.0)
    else:
        mask = None
        rows3 = G * tl.arange(0, BR // G)[:, None, None] + tl.arange(0, G)[None, :, None]
        offs = (r0 + rows3) * cols + (c0 + tl.arange(0, BC)[None, None, :])
        x_in = tl.load(x_ptr + offs)
    if PRO > 0:
        x = prologue_value(x_in, y_ptr, offs, mask, PRO, IN_DTYPE)
        nan = x != x
        if not NATIVE_CASTS:
            x = tl.where(nan, 0.0, x)
        return x, nan, offs
    x = x_in.to(tl.float32)
    if NATIVE_CASTS:
        nan = x_in != x_in                  # on bf16/fp16 pairs
    else:                                   # (the interpreter holds bf16 as raw integers)
        nan = x != x
        x = tl.where(nan, 0.0, x)           # and its max keeps NaN
    return x, nan, offs


@triton.jit
def _store_col_words(qc_ptr, q, r0, c0, rows, G: tl.constexpr, BR: tl.constexpr = 128,
                     BC: tl.constexpr = 128):
    """Column-view bytes ``q`` [BR/G, G, BC] -> ``data[c, r0 + ...]`` as uint32 words."""
    shift = (tl.arange(0, G) * 8).to(tl.uint32)[None, :, None]
    words = tl.sum(q.to(tl.uint32) << shift, axis=1)               # [NI, BC]: rows G·i..+3
    offs_w = (c0 + tl.arange(0, BC))[None, :] * (rows // 4) + r0 // 4 \
        + tl.arange(0, BR // G)[:, None]
    tl.store(qc_ptr.to(tl.pointer_type(tl.uint32)) + offs_w, words)


@triton.jit
def fp8_rowcol_reg_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc,
                          n_tiles, sr_s0, sr_s1, sc_s0, sc_s1, FP8_EXP: tl.constexpr,
                          IN_EXP: tl.constexpr, E5M2: tl.constexpr, NAN_SEL: tl.constexpr,
                          NUM_STAGES: tl.constexpr, WRITE_ROW: tl.constexpr = True,
                          y_ptr=None, PRO: tl.constexpr = 0, IN_DTYPE: tl.constexpr = 1,
                          WRITE_COL: tl.constexpr = True, REVERSE: tl.constexpr = False,
                          TILE: tl.constexpr = False, src_ptr=None,
                          GATHER: tl.constexpr = False, seg=0, sc_e=0):
    """1x128 row and column views of every ``[128, 128]`` tile (pow2 scales); amax folded in.
    The scales go to ``sr[r, kb]`` / ``sc[c, kb]`` with the given strides (the op's layout is
    column-major, so a tile's 128 scales are one contiguous 512-byte run). ``WRITE_ROW=False``
    writes the column view alone (qr/sr untouched): no transposed copy for a column-only call;
    ``WRITE_COL=False`` the row view alone (qc/sc untouched).
    ``PRO`` > 0: the views of ``op(x, y)`` (:func:`prologue_value`; ``nn.recompute``'s input,
    recomputed from what backward keeps), never written out in bf16. ``REVERSE``: the tiles
    from the last one back (the producer's last writes may still be in L2). ``TILE``: one
    scale per 128x128 tile instead (a weight's W and its exact transpose Wᵀ, SPEC §8: the
    same bytes twice), the scales at ``sr[r0/128, c0/128]`` / ``sc[c0/128, r0/128]``; with
    ``seg`` (a multiple of 128; ``rows`` for one matrix) x's rows are stacked experts of
    ``seg`` rows each and Wᵀ is written per expert, ``[E, cols, seg]`` (its scales ``sc[e,
    c0/128, r0/128]``, ``sc_e`` apart), each expert's transpose.
    ``GATHER``: x is a grouped token matrix and the tiles walk its padded layout (``rows`` =
    the padded bound): padded row p reads x's row ``src_ptr[p]`` (-1: zeros) and the row
    view is written at that row (none for a gap row), the column view in padded coordinates,
    as if the padded copy had been quantized and its row view gathered back."""
    G: tl.constexpr = 4
    NI: tl.constexpr = 128 // G
    acc = tl.zeros((NI, G), dtype=tl.float32)                   # running row-block maxima
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        if REVERSE:
            t = n_tiles - 1 - t
        r0, c0 = tile_coords(t, n_tc, 128, 128)
        if GATHER:
            src = tl.load(src_ptr + tile_rows(r0, G, 128))                  # [NI, G]
            x, nan, offs = _load_tile(x_ptr, r0, c0, cols, G, y_ptr, PRO, IN_DTYPE, 128, src,
                                      True)
        else:
            src = tile_rows(r0, G, 128)
            x, nan, offs = _load_tile(x_ptr, r0, c0, cols, G, y_ptr, PRO, IN_DTYPE)
        a = tl.abs(x)
        rmax = tl.max(a, axis=2)                                  # [NI, G]
        acc = tl.maximum(acc, rmax)
        cmax = tl.max(tl.max(a, axis=1), axis=0)                  # [128]
        if TILE:
            # every element's scale is the tile's, written as the 1x128 views' per-row and
            # per-column maxima raised to the tile max: the same numbers, and the same code as
            # those views. (Converting once and storing the bytes both ways wrote ~40% of Wᵀ's
            # bytes wrong on the H100 with NAN_SEL off, Triton 3.6: session 22, call 2.)
            tmax = tl.max(cmax, axis=0)
            rmax = tl.maximum(rmax, tmax)
            cmax = tl.maximum(cmax, tmax)
            _, tinv = pow2_scale(tmax, FP8_EXP, IN_EXP)
        if WRITE_ROW:
            rscale, rinv = pow2_scale(rmax, FP8_EXP, IN_EXP)
            q = fp8_byte(x * rscale[:, :, None], E5M2, nan, NAN_SEL)
            if TILE:
                tl.store(qr_ptr + offs, q)
                tl.store(sr_ptr + (r0 // 128) * sr_s0 + (c0 // 128) * sr_s1, tinv)
            elif GATHER:                    # a gap row has no row in the row view
                tl.store(qr_ptr + offs, q, mask=(src >= 0)[:, :, None])
                tl.store(sr_ptr + src * sr_s0 + (c0 // 128) * sr_s1, rinv, mask=src >= 0)
            else:
                tl.store(qr_ptr + offs, q)
                tl.store(sr_ptr + src * sr_s0 + (c0 // 128) * sr_s1, rinv)
        if WRITE_COL:
            cscale, cinv = pow2_scale(cmax, FP8_EXP, IN_EXP)
            qcol = fp8_byte(x * cscale[None, None, :], E5M2, nan, NAN_SEL)
            if TILE:                        # expert e's rows r0 - e·seg .. of its [cols, seg]
                e = r0 // seg
                r_e = r0 - e * seg
                _store_col_words(qc_ptr + e * cols * seg, qcol, r_e, c0, seg, G)
                tl.store(sc_ptr + e * sc_e + (c0 // 128) * sc_s0 + (r_e // 128) * sc_s1, tinv)
            else:
                _store_col_words(qc_ptr, qcol, r0, c0, rows, G)
                tl.store(sc_ptr + (c0 + tl.arange(0, 128)) * sc_s0 + (r0 // 128) * sc_s1, cinv)
    tl.atomic_max(amax_ptr, tl.max(tl.max(acc, axis=1), axis=0))


@triton.jit
def fp8_value(byte, E5M2: tl.constexpr):
    """The exact fp32 value of FP8 bytes (uint8; NaN for the NaN codes): E5M2 is the top byte
    of an fp16; E4M3 through the hardware conversion, or (interpreter, whose fp8 casts read the
    NaN code as a number) from its bits."""
    if E5M2:
        out = (byte.to(tl.int16) << 8).to(tl.float16, bitcast=True).to(tl.float32)
    elif NATIVE_CASTS:
        out = byte.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        mag = byte & 0x7F
        v = tl.where(byte >= 128, -e4m3_value(mag), e4m3_value(mag))
        out = tl.where(mag == 0x7F, float("nan"), v)
    return out


@triton.jit
def mx8_expanded(byte, k, E5M2: tl.constexpr):
    """Expanded MXFP8 elements (``tensor.py``): ``value(byte) · 2^k`` (exact in fp32, ``k``
    broadcast) rounded to bf16 as ``QuantizedTensor.expand`` does (RNE: the product of a
    subnormal element and a tiny scale can be finer than bf16), returned as bf16."""
    v = fp8_value(byte, E5M2) * exp2_int(k)
    if not NATIVE_CASTS:                    # the interpreter's cast truncates: round first
        v = round_to_input_dtype(v, 1)
    return v.to(tl.bfloat16)


@triton.jit
def _store_col_bf16(qc_ptr, v, r0, c0, rows, NI: tl.constexpr, G: tl.constexpr,
                    BC: tl.constexpr = 128):
    """Column-view bf16 values ``v`` [NI, G, BC] -> ``data[c, r0 + ...]`` (bf16 ``[cols,
    rows]``) as uint32 words of two consecutive rows, joined inside the thread (G in-thread)."""
    b = v.to(tl.int16, bitcast=True).to(tl.uint32) & 0xFFFF
    shift = (tl.arange(0, 2) * 16).to(tl.uint32)[None, None, :, None]
    words = tl.sum(tl.reshape(b, (NI, G // 2, 2, BC)) << shift, axis=2)    # [NI, G/2, BC]
    offs_w = (c0 + tl.arange(0, BC))[None, None, :] * (rows // 2) + r0 // 2 \
        + (G // 2) * tl.arange(0, NI)[:, None, None] + tl.arange(0, G // 2)[None, :, None]
    tl.store(qc_ptr.to(tl.pointer_type(tl.uint32)) + offs_w, words)


@triton.jit
def mx8_tile(x, nan, offs, acc, r0, c0, cols, seg, qr_ptr, sr_ptr, qc_ptr, sc_ptr,
             ROW_ELEM: tl.constexpr, ROW_CEIL: tl.constexpr, COL_ELEM: tl.constexpr,
             COL_CEIL: tl.constexpr, NAN_SEL: tl.constexpr, ROW_EXP: tl.constexpr,
             COL_EXP: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
             WRITE_ROW: tl.constexpr, WRITE_COL: tl.constexpr):
    """One tile of :func:`mx8_rowcol_reg_kernel` (and ``quant_many_mx``'s): the views of the
    loaded ``x`` ``[BR/4, 4, BC]`` at (r0, c0) (:func:`_load_tile`; ``offs`` its offsets),
    written as that kernel's arguments say; returns ``acc``, the running maxima, updated."""
    G: tl.constexpr = 4
    NI: tl.constexpr = BR // G
    CB: tl.constexpr = BR // 32                 # the tile's 32-row column blocks
    RB: tl.constexpr = BC // 32                 # and 32-column row blocks
    a = tl.abs(x)
    if WRITE_ROW:           # row view: [NI, G, RB blocks, 32]
        rmax = tl.max(tl.reshape(a, (NI, G, RB, 32)), axis=3)             # [NI, G, RB]
        acc = tl.maximum(acc, tl.max(rmax, axis=2))
        k = mx_exponent(rmax, ROW_ELEM, ROW_CEIL)
        y = tl.reshape(tl.reshape(x, (NI, G, RB, 32)) * exp2_int(-k)[:, :, :, None],
                       (NI, G, BC))
        qr = fp8_byte(y, ROW_ELEM == 1, nan, NAN_SEL)
        if ROW_EXP:
            qr = tl.reshape(mx8_expanded(tl.reshape(qr, (NI, G, RB, 32)),
                                         k[:, :, :, None], ROW_ELEM == 1), (NI, G, BC))
        tl.store(qr_ptr + offs, qr)
        rows3 = r0 + G * tl.arange(0, NI)[:, None, None] + tl.arange(0, G)[None, :, None]
        sblk = c0 // 32 + tl.arange(0, RB)[None, None, :]
        tl.store(sr_ptr + rows3 * (cols // 32) + sblk, (k + 127).to(tl.uint8))
    else:
        acc = tl.maximum(acc, tl.max(a, axis=2))
    if WRITE_COL:           # column view: [CB blocks, 8 i, G, BC]: rows 32g .. 32g+31
        cmax = tl.max(tl.max(tl.reshape(a, (CB, 8, G, BC)), axis=2), axis=1)   # [CB, BC]
        kc = mx_exponent(cmax, COL_ELEM, COL_CEIL)
        yc = tl.reshape(tl.reshape(x, (CB, 8, G, BC)) * exp2_int(-kc)[:, None, None, :],
                        (NI, G, BC))
        qc = fp8_byte(yc, COL_ELEM == 1, nan, NAN_SEL)
        e = r0 // seg                   # the expert (0 for one matrix) and its rows
        r_e = r0 - e * seg
        if COL_EXP:
            qc = mx8_expanded(tl.reshape(qc, (CB, 8, G, BC)), kc[:, None, None, :],
                              COL_ELEM == 1)
            _store_col_bf16(qc_ptr + e * cols * seg, tl.reshape(qc, (NI, G, BC)), r_e, c0,
                            seg, NI, G, BC)
        else:
            _store_col_words(qc_ptr + e * cols * seg, qc, r_e, c0, seg, G, BR, BC)
        cidx = (c0 + tl.arange(0, BC))[None, :] * (seg // 32) + r_e // 32 \
            + tl.arange(0, CB)[:, None]
        tl.store(sc_ptr + e * cols * (seg // 32) + cidx, (kc + 127).to(tl.uint8))
    return acc


@triton.jit
def mx8_rowcol_reg_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc,
                          n_tiles, ROW_ELEM: tl.constexpr, ROW_CEIL: tl.constexpr,
                          COL_ELEM: tl.constexpr, COL_CEIL: tl.constexpr,
                          NAN_SEL: tl.constexpr, NUM_STAGES: tl.constexpr,
                          ROW_EXP: tl.constexpr = False, COL_EXP: tl.constexpr = False,
                          REVERSE: tl.constexpr = False, BR: tl.constexpr = 128,
                          y_ptr=None, PRO: tl.constexpr = 0, IN_DTYPE: tl.constexpr = 1,
                          seg=0, WRITE_ROW: tl.constexpr = True, WRITE_COL: tl.constexpr = True,
                          BC: tl.constexpr = 128):
    """MXFP8 row view (1x32 blocks, UE8M0 bytes ``[rows, cols/32]``) and column view (32x1,
    stored transposed, bytes ``[cols, rows/32]``) of every ``[BR, BC]`` tile (BR 32, 64 or
    128: the column view's 32-row blocks need whole ones; fewer rows hold fewer values a
    thread; BC 128 or 64, a multiple of the row blocks' 32); the amax of each view goes to
    ``amax_ptr[0]`` / ``[1]`` (the same number: no RHT here). ELEM: 0 for E4M3 elements, 1
    for E5M2 (``quant_mx``'s codes). ROW_EXP / COL_EXP: that view written expanded instead
    of as codes (bf16, :func:`mx8_expanded`; the scale bytes either way). ``REVERSE`` and ``PRO``
    (the views of ``op(x, y)``) as in :func:`fp8_rowcol_reg_kernel`. ``seg`` (a multiple of
    BR; ``rows`` for one matrix): x's rows are stacked experts of ``seg`` rows and the column
    view is written per expert, ``[E, cols, seg]`` (scales ``[E, cols, seg/32]``): every
    expert weight's transpose (as ``fp8_rowcol_reg_kernel``'s ``seg``). ``WRITE_ROW=False`` /
    ``WRITE_COL=False``: that view is neither computed nor written (its pointers unused), e.g.
    a recomputed input's column view alone (``nn.recompute``), expanded and from a prologue."""
    G: tl.constexpr = 4
    acc = tl.zeros((BR // G, G), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        if REVERSE:
            t = n_tiles - 1 - t
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        x, nan, offs = _load_tile(x_ptr, r0, c0, cols, G, y_ptr, PRO, IN_DTYPE, BR, BC=BC)
        acc = mx8_tile(x, nan, offs, acc, r0, c0, cols, seg, qr_ptr, sr_ptr, qc_ptr, sc_ptr,
                       ROW_ELEM, ROW_CEIL, COL_ELEM, COL_CEIL, NAN_SEL, ROW_EXP, COL_EXP, BR,
                       BC, WRITE_ROW, WRITE_COL)
    amax = tl.max(tl.max(acc, axis=1), axis=0)
    tl.atomic_max(amax_ptr, amax)
    tl.atomic_max(amax_ptr + 1, amax)
