"""NVFP4 row view alone (1x16 blocks along the rows of x), one whole block per thread.

What ``ms.quantize(x, "nvfp4")`` asks for, and a split pair's second launch (a dy pair's SR row
view, an x pair's row view written expanded): x ``[rows, cols]`` (bf16 or fp16) into E2M1
codes packed two a byte (or the expanded bf16 values ``value · block_scale``, ``tensor.py``)
and one E4M3 scale byte per block of 16 (SPEC §2).

Layout
======
A program owns ``[BR, NB]`` blocks: rows ``r0 .. r0 + BR``, blocks ``b0 .. b0 + NB`` (columns
``16·b0 .. 16·(b0 + NB)``). A block is 32 bytes of bf16: its two halves (elements 0-7, 8-15)
are loaded as int32 words ``[BR, NB, 4]`` each, 16 bytes a thread, so that one thread holds a
whole block and every per-block operation stays in registers:

* element ``k = 8h + 2j + p`` is the low (p = 0) or high (p = 1) half of word j of half h;
  the four fp32 tensors ``(h, p)`` are unpacked with one integer op an element;
* the block maximum is an in-thread reduction (no shuffle), its scale byte and encode factor
  are computed once a block;
* codes pack in-thread: byte j of half h's word is ``code(8h+2j) | code(8h+2j+1) << 4``, and
  the block's two words go out together (the expanded values: two 16-byte stores of bf16
  pairs);
* E2M1 codes come from the rounded value times 2^-126, whose bits are the code, each shifted
  straight to its nibble (``_e2m1.scaled_e2m1_nibble``): no compare-and-select chain.
* SR: the block's 128 Philox bits (counter ``r · cols/16 + b``, key ``seed``, byte k for
  element k, as the other passes) from one ``randint4x`` in the same thread (``PHILOX`` bit
  0, ``CONFIG`` ``PHILOX_WIDE``: ``_philox.philox4x32``, each round's two products as one wide
  multiply); bit 1 (``SR_PRMT``, codes): each byte placed by one ``prmt`` (``_e2m1._sr_sum``).
* NaN (``NAN_TILE``): the block maxima are taken with NaN kept, one ``max.NaN`` an element;
  a tile where no block has a NaN quantizes straight from them, and only a tile that holds
  one takes the per-element selects that read NaN as 0 (a branch on the tile's flag: the
  selects were ~3 of the ~23 instructions an element).
* RHT (codes, RNE or the caller's bytes): the block is the RHT's 16-chunk, so its rotation
  (``_rht.rotated_blocks``: bf16 clamped, rounded and maximized two values a word) runs in
  the same thread, and a NaN, which fills its block, zeroes the block's codes under the NaN
  scale byte. Its amax is the v3 amax pass's. A row view with the RHT rounded with in-kernel
  Philox, or written expanded, keeps the rows pass.
* Stores (``STORE64``): a block's two code words as one 8-byte store and its scale byte
  from the thread that holds it, the offsets marked non-contiguous so that Triton does not
  regroup them through shared memory (two barriers a tile).

The register pass (``quant_nvfp4_reg``) holds 16-row-spaced rows of a ``[256, 64]`` tile for
its column view; its row view alone splits each block across two lanes (one shuffle a block
maximum, a Philox trade across the pair) and runs at 6 programs an SM. Here nothing crosses
threads. Each program holds its next tile's words as it quantizes this one (``PREFETCH``: the
loads of tile t + programs are issued before tile t's arithmetic, the last tile loaded again
at the end rather than masked), so one warp a program keeps loads in flight without the
occupancy that two warps bought before. Codes at [2, 32] blocks (two a thread), 24 programs an
SM; expanded views at [4, 8], 32 (``quant_nvfp4.CONFIG["ROW1"]``).

Measured (H200, graph-replayed, 8192² bf16, amax given; ``quant_notes.md``): RNE codes 58.7
µs with ``PREFETCH`` (session 40; H100, session 31: 85.4 against the reg pass's 125.9), 55.8
with session 57's tile index, scale decode and codes (72% of the copy rate counting x once);
SR codes 74.6; RHT codes 65.6-66.2 (61.5-62.1%, session 58). Training's expanded views (84.3 /
87.2 µs, RNE / SR) keep the old tile index and scale decode (session 57). Two tiles an
iteration ran 4-18% slower.

Numerics: the helpers of every NVFP4 kernel (``_utils.nvfp4_block_scales``, ``_e2m1``; codes
equal to ``scaled_e2m1_code``'s over every bf16 pattern, ``tests/test_e2m1_values.py``), so
the reference's bits: NaN reads as 0 and flags its block (scale byte 0x7F); an expanded view
keeps NaN in the block maximum instead (``EXP`` 1, ``CONFIG["EXP_NAN_MAX"]``) or selects it
per element (``EXP`` 2). ``tests/test_kernels_nvfp4_row.py``: bit for bit in the interpreter.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._e2m1 import nvfp4_expanded_value, scaled_e2m1_nibble
from ._philox import philox_words
from ._rht import clamp_bf16_words, rotated_blocks
from ._utils import (bf16_pair, max_keep_nan, nvfp4_amax_of, nvfp4_block_scales,
                     nvfp4_scales_of, split_nan, store_amaxes, tile_coords, tile_coords_hoisted)
from .quant_nvfp4_reg import RHT_SIGN_MASK
from .quant_nvfp4_reg_views import _prologue_words, _word_half

__all__ = ["nvfp4_row_kernel"]

_SIGNS = tl.constexpr(RHT_SIGN_MASK)          # the d = 16 RHT's sign vector (SPEC §4), as bits


@triton.jit
def _inside(r, b, rows, cols):
    """Which of the blocks ``[BR, NB]`` (rows ``r``, block columns ``b``) lie inside x."""
    return (r < rows) & (b < cols // 16)


@triton.jit
def _load_half(x_ptr, r, b, h, rows, cols, EVEN: tl.constexpr):
    """Words 4h .. 4h+3 (elements 8h .. 8h+7) of blocks ``b`` of rows ``r``: int32 [BR, NB, 4]."""
    w = tl.arange(0, 4)[None, None, :]
    offs = r[:, :, None] * (cols // 2) + b[:, :, None] * 8 + 4 * h + w
    x_at = x_ptr.to(tl.pointer_type(tl.int32))
    if EVEN:
        out = tl.load(x_at + offs)
    else:
        out = tl.load(x_at + offs, mask=_inside(r, b, rows, cols)[:, :, None], other=0)
    return out


@triton.jit
def _load_words(x_ptr, y_ptr, r, b, rows, cols, EVEN: tl.constexpr, PRO: tl.constexpr):
    """The raw words of blocks ``[BR, NB]``: x's two halves, and y's for the two-tensor
    prologues (``PRO`` 2, 4; otherwise x's again, unused)."""
    x0 = _load_half(x_ptr, r, b, 0, rows, cols, EVEN)
    x1 = _load_half(x_ptr, r, b, 1, rows, cols, EVEN)
    if PRO == 2 or PRO == 4:
        y0 = _load_half(y_ptr, r, b, 0, rows, cols, EVEN)
        y1 = _load_half(y_ptr, r, b, 1, rows, cols, EVEN)
    else:
        y0 = x0
        y1 = x1
    return x0, x1, y0, y1


@triton.jit
def _raw(xw, yw, IN_DTYPE: tl.constexpr, PRO: tl.constexpr, RHT: tl.constexpr):
    """A half's raw words of ``x`` (``PRO`` > 0: of ``op(x, y)``); bf16 to be rotated clamped."""
    if PRO == 2 or PRO == 4:
        xw = _prologue_words(xw, yw, PRO, IN_DTYPE)
    elif PRO > 0:
        xw = _prologue_words(xw, xw, PRO, IN_DTYPE)
    if RHT and IN_DTYPE == 1:
        xw = clamp_bf16_words(xw)
    return xw


@triton.jit
def _bytes_of(w0, w1, w2, w3, h: tl.constexpr, p: tl.constexpr, WORD: tl.constexpr = False):
    """Random bytes of elements ``8h + 2j + p`` (j = 0..3 along the last axis) from a block's
    128 Philox bits: byte k of word k // 4 (``WORD``: the word and k % 4, unextracted)."""
    j = tl.arange(0, 4)[None, None, :]
    if h == 0:
        w = tl.where(j < 2, w0[:, :, None], w1[:, :, None])
    else:
        w = tl.where(j < 2, w2[:, :, None], w3[:, :, None])
    if WORD:
        out = (w, (j % 2) * 2 + p)
    else:
        w = w.to(tl.uint32, bitcast=True)
        out = ((w >> ((j % 2) * 16 + 8 * p).to(tl.uint32)) & 255).to(tl.int32)
    return out


@triton.jit
def _caller_bytes(b_ptr, r, b, h: tl.constexpr, p: tl.constexpr, rows, cols):
    j = tl.arange(0, 4)[None, None, :]
    offs = r[:, :, None] * cols + b[:, :, None] * 16 + 8 * h + 2 * j + p
    return tl.load(b_ptr + offs, mask=_inside(r, b, rows, cols)[:, :, None], other=0).to(tl.int32)


@triton.jit
def _store_half_values(q_ptr, vals_e, vals_o, r, b, h: tl.constexpr, rows, cols,
                       EVEN: tl.constexpr):
    """Expanded bf16 values of half h (even and odd elements) as four words a block."""
    w = tl.arange(0, 4)[None, None, :]
    offs = r[:, :, None] * (cols // 2) + b[:, :, None] * 8 + 4 * h + w
    words, at = bf16_pair(vals_e, vals_o), q_ptr.to(tl.pointer_type(tl.int32))
    if EVEN:
        tl.store(at + offs, words)
    else:
        tl.store(at + offs, words, mask=_inside(r, b, rows, cols)[:, :, None])


@triton.jit
def _block(words, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols,
           IN_DTYPE: tl.constexpr, SR: tl.constexpr, EXP: tl.constexpr, EVEN: tl.constexpr,
           PRO: tl.constexpr, NAN_TILE: tl.constexpr, STORE64: tl.constexpr,
           RHT: tl.constexpr = False, PHILOX: tl.constexpr = 0):
    """Quantize and store the blocks ``[BR, NB]`` at rows ``r``, block columns ``b``, whose
    raw words ``words`` (:func:`_load_words`) are loaded. ``RHT`` (codes, RNE or the caller's
    bytes): each block rotated first (:func:`_finish_rht`).

    ``NAN_TILE`` (codes only): the block maxima are taken with NaN kept, and only a tile that
    holds a NaN takes the per-element NaN selects (NaN reads as 0); a tile without one uses
    its maxima as they are (the same bits: with no NaN, the selects change nothing)."""
    raw0 = _raw(words[0], words[2], IN_DTYPE, PRO, RHT)
    raw1 = _raw(words[1], words[3], IN_DTYPE, PRO, RHT)
    v = (_word_half(raw0, 0, IN_DTYPE), _word_half(raw0, 1, IN_DTYPE),      # (h, p) order
         _word_half(raw1, 0, IN_DTYPE), _word_half(raw1, 1, IN_DTYPE))
    if RHT:
        _finish_rht(v, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, r, b, rows, cols, IN_DTYPE, SR, EVEN,
                    STORE64)
    elif EXP == 1 or (NAN_TILE and EXP == 0):  # NaN kept in the maxima: NaN where a block has one
        vmax = _max_abs_keep_nan(v)
        bad = vmax != vmax
        if NAN_TILE and EXP == 0:
            if tl.max(tl.reshape(bad.to(tl.int32), [bad.numel]), axis=0) == 0:
                _finish(v, vmax, bad, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows,
                        cols, SR, EXP, EVEN, STORE64, PHILOX)
            else:
                _finish_nan0(v, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols,
                             SR, EXP, EVEN, STORE64, PHILOX)
        else:
            _finish(v, vmax, bad, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols,
                    SR, EXP, EVEN, STORE64, PHILOX)
    else:
        _finish_nan0(v, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols, SR, EXP,
                     EVEN, STORE64, PHILOX)


@triton.jit
def _elements(v):
    """The 16 elements of each block as 16 ``[BR, NB]`` tensors, element ``k = 8h + 2j + p``
    from part ``(h, p)``'s word ``j`` (a split of the in-thread last axis: no data moves)."""
    out = ()
    for h in tl.static_range(2):
        lo, hi = (), ()
        for p in tl.static_range(2):
            t = tl.reshape(v[2 * h + p], (v[0].shape[0], v[0].shape[1], 2, 2))   # [.., a, c]
            even_j, odd_j = tl.split(t)                  # j = 2a + c: c = 0, c = 1 -> [.., a]
            j0, j2 = tl.split(even_j)
            j1, j3 = tl.split(odd_j)
            if p == 0:
                lo = (j0, j1, j2, j3)
            else:
                hi = (j0, j1, j2, j3)
        for j in tl.static_range(4):
            out = out + (lo[j], hi[j])
    return out


@triton.jit
def _finish_rht(v, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, r, b, rows, cols, IN_DTYPE: tl.constexpr,
                SR: tl.constexpr, EVEN: tl.constexpr, STORE64: tl.constexpr):
    """Codes of the RHT'd blocks (SPEC §4: ``y = x_block @ M``, d = 16, the block itself being
    the RHT chunk, so the whole rotation stays in the thread: ``_rht.rotated_blocks``, as the
    reg pass rotates its column view). A NaN fills its block: the block's scale byte is the
    NaN byte and its codes are 0, as the reference's NaN-read-as-0 rotation gives."""
    ys, vmax, bad = rotated_blocks(_elements(v), IN_DTYPE, _SIGNS)      # bf16: clamped in _raw
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec, True)
    scale_byte = tl.where(bad, 127, scale_byte)
    if SR == 1:                 # byte k of the caller's for element k, loaded as the parts are
        rbs = _elements((_caller_bytes(b_ptr, r, b, 0, 0, rows, cols),
                         _caller_bytes(b_ptr, r, b, 0, 1, rows, cols),
                         _caller_bytes(b_ptr, r, b, 1, 0, rows, cols),
                         _caller_bytes(b_ptr, r, b, 1, 1, rows, cols)))
    word0 = tl.zeros(r.shape, dtype=tl.int32) + tl.zeros(b.shape, dtype=tl.int32)
    word1 = word0
    for k in tl.static_range(16):
        if SR == 1:
            rb = rbs[k]
        else:
            rb = 0
        if k < 8:
            word0 = word0 | scaled_e2m1_nibble(ys[k], enc, rb, SR > 0, 4 * k)
        else:
            word1 = word1 | scaled_e2m1_nibble(ys[k], enc, rb, SR > 0, 4 * (k - 8))
    _store_codes(q_ptr, s_ptr, tl.where(bad, 0, word0), tl.where(bad, 0, word1), scale_byte,
                 r, b, rows, cols, EVEN, STORE64)


@triton.jit
def _max_abs_keep_nan(v):
    """Each block's ``max |v|`` over its four ``(h, p)`` parts, NaN where the block has one."""
    m = tl.maximum(tl.maximum(tl.abs(v[0]), tl.abs(v[1]), propagate_nan=tl.PropagateNan.ALL),
                   tl.maximum(tl.abs(v[2]), tl.abs(v[3]), propagate_nan=tl.PropagateNan.ALL),
                   propagate_nan=tl.PropagateNan.ALL)
    return max_keep_nan(m, 2)


@triton.jit
def _finish_nan0(v, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols,
                 SR: tl.constexpr, EXP: tl.constexpr, EVEN: tl.constexpr, STORE64: tl.constexpr,
                 PHILOX: tl.constexpr = 0):
    """:func:`_finish` with NaN read as 0 (per element) and flagging its block."""
    a0, n0 = split_nan(v[0])
    a1, n1 = split_nan(v[1])
    a2, n2 = split_nan(v[2])
    a3, n3 = split_nan(v[3])
    vmax = tl.max(tl.maximum(tl.maximum(tl.abs(a0), tl.abs(a1)),
                             tl.maximum(tl.abs(a2), tl.abs(a3))), axis=2)
    bad = tl.max((n0 | n1 | n2 | n3).to(tl.int32), axis=2) > 0
    _finish((a0, a1, a2, a3), vmax, bad, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows,
            cols, SR, EXP, EVEN, STORE64, PHILOX)


@triton.jit
def _finish(v, vmax, bad, b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows, cols,
            SR: tl.constexpr, EXP: tl.constexpr, EVEN: tl.constexpr, STORE64: tl.constexpr,
            PHILOX: tl.constexpr = 0):
    """Scale bytes from the block maxima ``vmax`` (0x7F where ``bad``), then the codes or
    expanded values of the four parts ``v``, stored (``STORE64``: :func:`_store_codes`)."""
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec, EXP == 0)   # (_tile's rule)
    scale_byte = tl.where(bad, 127, scale_byte)
    if SR == 2:
        w0, w1, w2, w3 = philox_words(seed, r * (cols // 16) + b, PHILOX % 2 == 1)
    outs = ()
    for i in tl.static_range(4):                      # (h, p) = (i // 2, i % 2)
        rpos = None                                   # PHILOX bit 1: the word, byte rpos
        if SR == 2 and PHILOX >= 2 and EXP == 0:
            rb, rpos = _bytes_of(w0, w1, w2, w3, i // 2, i % 2, True)
        elif SR == 2:
            rb = _bytes_of(w0, w1, w2, w3, i // 2, i % 2)
        elif SR == 1:
            rb = _caller_bytes(b_ptr, r, b, i // 2, i % 2, rows, cols)
        else:
            rb = 0
        if EXP:
            outs = outs + (nvfp4_expanded_value(v[i], enc[:, :, None], rb,
                                                scale_byte[:, :, None], SR > 0),)
        else:   # element 8h + 2j + p: nibble 2j + p of word h, placed as it is rounded
            s = 8 * tl.arange(0, 4)[None, None, :] + 4 * (i % 2)
            outs = outs + (scaled_e2m1_nibble(v[i], enc[:, :, None], rb, SR > 0, s, rpos),)
    if EXP:
        _store_half_values(q_ptr, outs[0], outs[1], r, b, 0, rows, cols, EVEN)
        _store_half_values(q_ptr, outs[2], outs[3], r, b, 1, rows, cols, EVEN)
    else:
        word0 = tl.sum(outs[0] | outs[1], axis=2)
        word1 = tl.sum(outs[2] | outs[3], axis=2)
        _store_codes(q_ptr, s_ptr, word0, word1, scale_byte, r, b, rows, cols, EVEN, STORE64)
    if EXP:
        _store_scales(s_ptr, scale_byte, r, b, rows, cols, EVEN, STORE64)


@triton.jit
def _store_codes(q_ptr, s_ptr, word0, word1, scale_byte, r, b, rows, cols, EVEN: tl.constexpr,
                 STORE64: tl.constexpr):
    """A block's two code words (``[BR, NB]`` int32 each) and its scale byte, stored;
    ``STORE64``: as one 8-byte store, the scale byte from its thread (module docstring)."""
    ok = _inside(r, b, rows, cols)
    at = q_ptr + r * (cols // 8) + 2 * b               # the block's two words, 8 bytes
    if STORE64:                                         # one int64: word0 low, word1 high
        w64 = (word0.to(tl.uint32, bitcast=True).to(tl.uint64)
               | (word1.to(tl.uint32, bitcast=True).to(tl.uint64) << 32))
        at64 = q_ptr.to(tl.pointer_type(tl.uint64)) + tl.max_contiguous(
            r * (cols // 16) + b, [1, 1])
        if EVEN:
            tl.store(at64, w64)
        else:
            tl.store(at64, w64, mask=ok)
    elif EVEN:
        tl.store(at, word0)
        tl.store(at + 1, word1)
    else:
        tl.store(at, word0, mask=ok)
        tl.store(at + 1, word1, mask=ok)
    _store_scales(s_ptr, scale_byte, r, b, rows, cols, EVEN, STORE64)


@triton.jit
def _store_scales(s_ptr, scale_byte, r, b, rows, cols, EVEN: tl.constexpr,
                  STORE64: tl.constexpr):
    s_at = r * (cols // 16) + b
    if STORE64:                  # the byte where the thread holds it (no layout change)
        s_at = tl.max_contiguous(s_at, [1, 1])
    if EVEN:
        tl.store(s_ptr + s_at, scale_byte.to(tl.uint8))
    else:
        tl.store(s_ptr + s_at, scale_byte.to(tl.uint8), mask=_inside(r, b, rows, cols))


@triton.jit
def nvfp4_row_kernel(x_ptr, amax_ptr, seed_ptr, q_ptr, s_ptr, b_ptr, rows, cols, n_tc, n_tiles,
                     IN_DTYPE: tl.constexpr, BR: tl.constexpr, NB: tl.constexpr,
                     SR: tl.constexpr, EXP: tl.constexpr, EVEN: tl.constexpr,
                     NUM_STAGES: tl.constexpr, y_ptr=None, PRO: tl.constexpr = 0, n_part=0,
                     NP: tl.constexpr = 0, ar_ptr=None, NAN_TILE: tl.constexpr = False,
                     STORE64: tl.constexpr = False, RHT: tl.constexpr = False,
                     PREFETCH: tl.constexpr = False, PHILOX: tl.constexpr = 0):
    """Persistent loop over ``[BR, NB]``-block tiles of the row view (module docstring).
    ``amax_ptr``: the amax pass's buffer (slot 0), or with ``NP`` > 0 its ``n_part``
    per-program maxima, reduced here; program 0 then writes the amax to ``ar_ptr``. Codes as
    int32 words ``q [rows, cols/8]`` (``EXP``: bf16 ``q [rows, cols]``), scale bytes
    ``s [rows, cols/16]``; SR 1: the caller's bytes ``b [rows, cols]``, 2: Philox from
    ``seed_ptr``. ``PRO`` > 0: the view of ``op(x, y)`` (``op_specs.PROLOGUES``)."""
    amax = nvfp4_amax_of(amax_ptr, 0, n_part, NP)
    store_amaxes(amax, amax, ar_ptr, ar_ptr, True, False, NP)
    s_enc6, s_dec = nvfp4_scales_of(amax)
    seed = tl.load(seed_ptr) if SR == 2 else 0
    if PREFETCH:       # the next tile's words load while this one's are quantized
        # (the grid never exceeds the tiles, quant_nvfp4.launch_row; the clamp keeps the
        # first load inside x whatever the grid)
        r, b = _tile(tl.minimum(tl.program_id(0), n_tiles - 1), n_tc, BR, NB, EXP)
        x0, x1, y0, y1 = _load_words(x_ptr, y_ptr, r, b, rows, cols, EVEN, PRO)
        for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=1):
            # past the last tile, the last tile again (loaded, never stored: no mask needed)
            r_nx, b_nx = _tile(tl.minimum(t + tl.num_programs(0), n_tiles - 1), n_tc, BR, NB,
                               EXP)
            nx = _load_words(x_ptr, y_ptr, r_nx, b_nx, rows, cols, EVEN, PRO)
            _block((x0, x1, y0, y1), b_ptr, q_ptr, s_ptr, s_enc6, s_dec, seed, r, b, rows,
                   cols, IN_DTYPE, SR, EXP, EVEN, PRO, NAN_TILE, STORE64, RHT, PHILOX)
            x0, x1, y0, y1 = nx
            r, b = r_nx, b_nx
    else:
        for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0),
                          num_stages=NUM_STAGES):
            r, b = _tile(t, n_tc, BR, NB, EXP)
            _block(_load_words(x_ptr, y_ptr, r, b, rows, cols, EVEN, PRO), b_ptr, q_ptr,
                   s_ptr, s_enc6, s_dec, seed, r, b, rows, cols, IN_DTYPE, SR, EXP, EVEN, PRO,
                   NAN_TILE, STORE64, RHT, PHILOX)


@triton.jit
def _tile(t, n_tc, BR: tl.constexpr, NB: tl.constexpr, EXP: tl.constexpr):
    """Rows ``[BR, 1]`` and block columns ``[1, NB]`` of tile ``t``. Codes (``EXP`` 0) take the
    hoisted tile division and the hardware's scale decode (session 57, module docstring)."""
    r0, b0 = tile_coords_hoisted(t, n_tc, BR, NB) if EXP == 0 else tile_coords(t, n_tc, BR, NB)
    return r0 + tl.arange(0, BR)[:, None], b0 + tl.arange(0, NB)[None, :]

