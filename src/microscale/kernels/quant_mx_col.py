"""MXFP4 column view with a column's 32-row block in one thread's registers.

The column view of x ``[rows, cols]`` (what wgrad reads, stored as xᵀ ``[cols, rows]``) has
its MX blocks along x's rows: 32 rows of one column, rotated first by the 32-point RHT in the
mxfp4 recipe (SPEC §4, §7). ``quant_mx_views.mx_col_view`` loads the tile as ``[G, 32, BC]`` and
works along its middle axis: the block max is a cross-thread reduction, the codes are packed
by a cross-thread multiply-sum, and the RHT is an fp32 ``[32, 32]`` dot (32 FMAs an element,
with shared-memory layout changes; on an H100 the 125m mxfp4 step spent 33 of its 78 ms in that
kernel). Here the tile is loaded as 32 tiles ``x_j [G, BC]``, ``x_j[g, c]`` = row
``32·(r0/32 + g) + j`` of column ``c0 + c``: all 32 in the same register layout, so a block
is the 32 values ``x_j[g, c]`` of one thread and every step is elementwise across the 32
tiles, with no shuffle and no shared memory:

* RHT: ``u_j = clamp(x_j, ±2^124) · (±1/8)`` (``s_j/8``: exact), the Walsh-Hadamard butterfly
  across the 32 tiles (5 stages of 32 adds; Sylvester order, ``H[j][k] = (-1)^popcount(j&k)``),
  one multiply by fp32(sqrt 2), the round to the input dtype: ``hadamard.rht``'s arithmetic
  (``hadamard.rht_factors``), equal to it bit for bit whenever the chunk's sum is exact in
  fp32, the condition every RHT kernel here meets (``tests/test_kernels_quant.py``, RHT note);
* the block max is 31 in-thread maxima, the UE8M0 exponent ``mx_exponent``'s, NaN read as 0
  and its block's scale byte 0xFF (``quant.mx``);
* codes RNE or SR (SPEC §5; random bytes from Philox keyed by seed + 1 with the counters
  ``c·rows/16 + 2·group`` and ``+ 1``, byte ``j mod 16``: ``mx_col_view``'s stream, so a seed
  gives the same codes on either path), packed in-thread into four uint32 words; or written
  expanded, bf16 ``value(code)·2^k`` (``tensor.py``). Each thread stores its column's 16
  bytes of codes (or 64 bytes of bf16) and one scale byte.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..hadamard import rht_signs
from ._rht import rht_butterfly
from ._e2m1 import e2m1_mag_code, e2m1_round_value, scaled_e2m1_code_fast, sign_nibble
from ._utils import bf16_pair, bits_byte, exp2_int, mx_exponent, stack_last

__all__ = ["RHT_SIGN_MASK_32", "mx4_col_view_reg"]

# Bit j set where the d = 32 sign s_j is -1 (hadamard.rht_signs(32)): a compile-time constant.
RHT_SIGN_MASK_32 = sum(1 << j for j, s in enumerate(rht_signs(32)) if s < 0)


@triton.jit
def mx4_col_view_reg(x_ptr, seed_ptr, bits_ptr, q_ptr, s_ptr, r0, c0, rows, cols,
                     IN_DTYPE: tl.constexpr, G: tl.constexpr, BC: tl.constexpr,
                     CEIL: tl.constexpr, RHT: tl.constexpr, SR: tl.constexpr,
                     EXP: tl.constexpr, SIGNS: tl.constexpr):
    """MXFP4 column view of the ``[32·G, BC]`` tile at ``(r0, c0)``: codes as int32 words
    ``q [cols, rows/8]`` (EXP: bf16 ``q [cols, rows]``), scale bytes ``s [cols, rows/32]``;
    returns the blocks' maxima ``[G, BC]`` for the amax (as ``quant_mx_views.mx_col_view``)."""
    offs_c = c0 + tl.arange(0, BC)[None, :]
    grp = r0 // 32 + tl.arange(0, G)[:, None]
    ok = (grp < rows // 32) & (offs_c < cols)                           # [G, BC]
    xs = ()
    for j in tl.static_range(32):
        xs = xs + (tl.load(x_ptr + (grp * 32 + j) * cols + offs_c, mask=ok,
                           other=0.0).to(tl.float32),)
    if RHT:
        xs = rht_butterfly(xs, 32, IN_DTYPE, SIGNS)
    bad = xs[0] != xs[0]                       # NaN reads as 0 and marks its block
    vmax = tl.abs(tl.where(bad, 0.0, xs[0]))
    for j in tl.static_range(1, 32):
        nan_j = xs[j] != xs[j]
        bad = bad | nan_j
        vmax = tl.maximum(vmax, tl.abs(tl.where(nan_j, 0.0, xs[j])))
    k = mx_exponent(vmax, 2, CEIL)
    sbyte = tl.where(bad, 255, k + 127).to(tl.uint8)
    inv = exp2_int(-k)
    if SR == 2:
        seed = tl.load(seed_ptr) + 1
        base = offs_c * (rows // 16) + grp * 2
        a0, a1, a2, a3 = tl.randint4x(seed, base)
        b0, b1, b2, b3 = tl.randint4x(seed, base + 1)
    if EXP:
        scale = tl.where(bad, float("nan"), exp2_int(k))
    w0 = tl.zeros((G, BC), dtype=tl.int32)
    w1 = tl.zeros((G, BC), dtype=tl.int32)
    w2 = tl.zeros((G, BC), dtype=tl.int32)
    w3 = tl.zeros((G, BC), dtype=tl.int32)
    pairs = ()
    for j in tl.static_range(32):
        v = tl.where(xs[j] != xs[j], 0.0, xs[j]) * inv
        if SR == 1:
            rb = tl.load(bits_ptr + offs_c * rows + grp * 32 + j, mask=ok, other=0).to(tl.int32)
        elif SR == 2:
            if j < 16:                         # bytes 0-15: counter base, 16-31: base + 1
                rb = bits_byte(a0, a1, a2, a3, j)
            else:
                rb = bits_byte(b0, b1, b2, b3, j - 16)
        else:
            rb = 0
        if EXP:                                # bf16 bits, two neighbouring rows a word
            val = e2m1_round_value(v, rb, SR > 0) * scale      # a value, no code (_e2m1)
            if j % 2 == 0:
                lo = val
            else:
                pairs = pairs + (bf16_pair(lo, val),)
        else:
            if SR > 0:                         # the SR value's code (_e2m1: PTX mul.rz)
                code = scaled_e2m1_code_fast(v, 1.0, rb, True)
            else:
                code = e2m1_mag_code(tl.minimum(tl.abs(v), 6.0)) | sign_nibble(v)
            if j < 8:
                w0 = w0 | (code << (4 * (j % 8)))
            elif j < 16:
                w1 = w1 | (code << (4 * (j % 8)))
            elif j < 24:
                w2 = w2 | (code << (4 * (j % 8)))
            else:
                w3 = w3 | (code << (4 * (j % 8)))
    if EXP:
        out = stack_last(pairs, 16)            # [G, BC, 16] words: rows 32g .. 32g + 31
        widx = (offs_c * (rows // 2) + grp * 16)[:, :, None] + tl.arange(0, 16)[None, None, :]
        tl.store(q_ptr.to(tl.pointer_type(tl.int32)) + widx, out, mask=ok[:, :, None])
    else:
        out = stack_last((w0, w1, w2, w3), 4)  # [G, BC, 4]: codes 0-7, 8-15, 16-23, 24-31
        widx = (offs_c * (rows // 8) + grp * 4)[:, :, None] + tl.arange(0, 4)[None, None, :]
        tl.store(q_ptr + widx, out, mask=ok[:, :, None])
    tl.store(s_ptr + offs_c * (rows // 32) + grp, sbyte, mask=ok)
    return vmax
