"""The RHT of a kernel's tile (SPEC §4), as ``hadamard.rht`` computes it: shared device code.

``rht_tile`` rotates each d-chunk of a tile's rows, ``rht_cols`` each d-chunk of its columns
(a batched dot along the middle axis of ``[G, d, C]``). The input is clamped to ``±L(d)``, the
chunk product taken in fp32 and rounded to the input dtype with saturation (docs/SPEC.md N2).
For d = 16 and 64 the entries of M (±1/4, ±1/8) are exact in bf16/fp16, so the product runs
on tensor cores with exact products; for d = 32 it is the exact ±1/8 sum times fp32(sqrt 2)
(``hadamard.rht_factors``), on IEEE FMAs. Either way a kernel's bits equal the reference's
whenever the chunk's sum is exact in fp32. Kernels that hold a whole chunk in one thread (the
NVFP4 reg pass, ``quant_mx_col``) rotate it with :func:`rht_butterfly` instead: the same
products, added in the Walsh-Hadamard butterfly's order.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._host import interpreting
from ._utils import (TENSOR_CORE_RHT, abs_for_max, bf16_pair, clamp_keep_nan,
                     rotated_block_max, round_to_input_dtype)
from .quant_rowcol_reg import prologue_of

__all__ = ["dot_fp32", "rht_tile", "rht_cols", "rht_cols_max", "tile_amaxes", "raise_amaxes",
           "rht_butterfly", "rht_pair_maxima", "finish_rotated", "bf16_halves", "round_bf16_pair",
           "clamp_bf16_words", "clamp_bf16_chunk", "round_bf16_blocks", "rotated_blocks"]

_PACKED_PTX = tl.constexpr(not interpreting())   # bf16x2 PTX (the interpreter: the same bits)


@triton.jit
def dot_fp32(a, b, IN_DTYPE: tl.constexpr, EXACT_B: tl.constexpr):
    """``a @ b`` (2-D or batched 3-D) of fp32 tiles holding input-dtype values, fp32 result.

    bf16/fp16 inputs use the tensor cores in their own dtype: the values and +-1/4 (the
    d=16 RHT entries) are exact there, every product is exact in fp32 and the fp32
    accumulation gives the reference's sum whenever that sum is exact in fp32 (unless one
    chunk spans more than ~16 binades). ``EXACT_B`` says the entries of the matrix are exact
    in the narrow dtype (±1/4 and ±1/8 for d = 16 and 64; d = 32 passes False, see
    :func:`_rht_exact`).
    fp32 inputs, other d, and the interpreter use IEEE FMAs.
    """
    if TENSOR_CORE_RHT and EXACT_B and IN_DTYPE == 1:
        y = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), out_dtype=tl.float32)
    elif TENSOR_CORE_RHT and EXACT_B and IN_DTYPE == 2:
        y = tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float32)
    else:
        y = tl.dot(a, b, input_precision="ieee")
    return y


@triton.jit
def _rht_limit(D: tl.constexpr):
    """``hadamard.rht_input_limit(D)`` = 2^(127 - ceil(log2(D)/2))."""
    if D >= 128:
        lim = 1.0633823966279327e37          # 2^123
    elif D >= 32:
        lim = 2.1267647932558654e37          # 2^124
    elif D >= 8:
        lim = 4.253529586511731e37           # 2^125
    else:
        lim = 8.507059173023462e37           # 2^126
    return lim


@triton.jit
def _saturate_to_input(y, IN_DTYPE: tl.constexpr):
    """Clamp an fp32 RHT result to the input dtype's ±max before rounding (bf16, fp16)."""
    if IN_DTYPE == 1:
        y = clamp_keep_nan(y, 3.3895313892515355e38)
    elif IN_DTYPE == 2:
        y = clamp_keep_nan(y, 65504.0)
    return round_to_input_dtype(y, IN_DTYPE)


@triton.jit
def _rht_exact(m, D: tl.constexpr):
    """``(matrix, post)`` for the rotation by ``m`` = M or Mᵀ (``hadamard.rht_factors``): M
    itself and 1 for D = 16, 64 (entries ±1/4, ±1/8: powers of two); for D = 32 the signs
    times 2^-3 and post = fp32(1/sqrt(32))·2^3 = fp32(sqrt 2), so that the products and sums
    are exact (in any order) and one multiply rounds. D = 32 stays on IEEE FMAs: the same
    exact sums on bf16 tensor cores (the [G, 32, 32] batched dot of a column view) made the
    125m mxfp4 step 3.9x slower on an H100 (session 14, call 4)."""
    tl.static_assert(D == 16 or D == 32 or D == 64, "kernels rotate 16-, 32- or 64-chunks")
    if D == 32:
        out = tl.where(m > 0, 0.125, -0.125)
        post = 1.4142135381698608
    else:
        out = m
        post = 1.0
    return out, post


@triton.jit
def rht_tile(v, m, R: tl.constexpr, C: tl.constexpr, D: tl.constexpr, IN_DTYPE: tl.constexpr):
    """Rotate each D-chunk of the rows of fp32 tile ``v`` by ``m`` [D, D]; round to input dtype."""
    v = clamp_keep_nan(v, _rht_limit(D))
    mm, post = _rht_exact(m, D)
    y = dot_fp32(tl.reshape(v, (R * C // D, D)), mm, IN_DTYPE, D != 32)
    if D == 32:
        y = y * post
    return _saturate_to_input(tl.reshape(y, (R, C)), IN_DTYPE)


@triton.jit
def rht_cols(v, mt, G: tl.constexpr, D: tl.constexpr, C: tl.constexpr, IN_DTYPE: tl.constexpr):
    """Rotate along axis 1 of ``v`` [G, D, C]: ``y[g] = mt @ v[g]`` with ``mt = Mᵀ``; round."""
    v = clamp_keep_nan(v, _rht_limit(D))
    mm, post = _rht_exact(mt, D)
    y = dot_fp32(tl.broadcast_to(mm[None, :, :], (G, D, D)), v, IN_DTYPE, D != 32)
    if D == 32:
        y = y * post
    return _saturate_to_input(y, IN_DTYPE)


@triton.jit
def _rht16_t(SIGNS: tl.constexpr):
    """``Mᵀ`` of the d = 16 RHT as an fp32 [16, 16] tile built in registers: ``Mᵀ[k][j] =
    s_j · (-1)^popcount(j & k) / 4`` (SPEC §4; ``s_j`` from the bit mask SIGNS)."""
    k = tl.arange(0, 16)[:, None]
    j = tl.arange(0, 16)[None, :]
    jk = j & k
    parity = (jk ^ (jk >> 1) ^ (jk >> 2) ^ (jk >> 3)) & 1
    sign_j = (SIGNS >> j) & 1
    return tl.where((parity ^ sign_j) == 1, -0.25, 0.25)


@triton.jit
def rht_cols_max(v, vmax, R: tl.constexpr, C: tl.constexpr, IN_DTYPE: tl.constexpr,
                 SIGNS: tl.constexpr):
    """``max |y|`` over the d = 16 RHT of each 16-row chunk of the columns of ``v`` [R, C]
    (fp32 holding input-dtype values; ``y = M_chunk`` applied down the rows, as a column view
    rotates along its tokens), before the rounding to the input dtype: the caller finishes
    the maximum once (:func:`finish_rotated`). ``vmax`` is ``max|v|`` (NaN read as 0): where
    it is at most 2^125 the input clamp is the identity and is skipped (an Inf or a larger
    value takes it). The chunk product runs on the tensor cores (:func:`dot_fp32`, a batched
    ``Mᵀ @ chunk``). NaN fills its chunk (its column's 16 outputs) and is skipped, as every
    NVFP4 amax reads NaN as 0."""
    mt = tl.broadcast_to(_rht16_t(SIGNS)[None, :, :], (R // 16, 16, 16))
    if vmax <= _rht_limit(16):
        y = dot_fp32(mt, tl.reshape(v, (R // 16, 16, C)), IN_DTYPE, True)
    else:
        y = dot_fp32(mt, tl.reshape(clamp_keep_nan(v, _rht_limit(16)), (R // 16, 16, C)),
                     IN_DTYPE, True)
    return tl.max(tl.max(tl.max(abs_for_max(y), axis=2), axis=1), axis=0)


@triton.jit
def tile_amaxes(y, R: tl.constexpr, C: tl.constexpr, AMAX: tl.constexpr,
                OUT_DTYPE: tl.constexpr, SIGNS: tl.constexpr, AMAX_OP: tl.constexpr = 0):
    """``(max|t|, max|RHT(t)|)`` of a stored output tile ``y`` [R, C] (fp32 holding the
    output dtype's values), NaN read as 0, as NVFP4's amax pass measures a tensor for its row
    view and its column view: ``AMAX`` 1 the first alone (the second the same), 2 the second
    over the d = 16 RHT down each column's 16-row chunks (:func:`rht_cols_max`, before its
    rounding). ``AMAX`` 0: zeros. ``t`` is y, or ``op(y)`` for a one-tensor prologue code
    ``AMAX_OP`` (relu², rounded as the quantizers' prologue rounds it: ``prologue_of``)."""
    if AMAX == 0:
        m_r = tl.full((), 0.0, tl.float32)
        m_c = m_r
    else:
        if AMAX_OP != 0:
            y = prologue_of(y, y, AMAX_OP, OUT_DTYPE)
        m_r = tl.max(tl.max(abs_for_max(y), axis=1), axis=0)
        m_c = m_r
        if AMAX == 2:
            m_c = rht_cols_max(y, m_r, R, C, OUT_DTYPE, SIGNS)
    return m_r, m_c


@triton.jit
def raise_amaxes(amax_ptr, m_r, m_c, AMAX: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """Raise ``amax_ptr[0]`` (a zeroed fp32 pair) to ``m_r`` and ``[1]`` to ``m_c``, the
    rotated maximum finished first (rounded to the output dtype, as the amax pass does)."""
    tl.atomic_max(amax_ptr, m_r)
    tl.atomic_max(amax_ptr + 1, finish_rotated(m_c, OUT_DTYPE) if AMAX == 2 else m_c)


@triton.jit
def _signed_chunk(xs, D: tl.constexpr, IN_DTYPE: tl.constexpr, SIGNS: tl.constexpr,
                  CLAMP: tl.constexpr):
    """``x_j·(±2^-e)`` for the chunk's D tiles (``s_j`` from SIGNS), clamped to ``±L(D)``
    first unless ``CLAMP`` is off: exact products."""
    if D == 16:
        pre = 0.25
        lim = 4.253529586511731e37             # 2^125 = L(16)
    else:
        pre = 0.125
        lim = 2.1267647932558654e37            # 2^124 = L(32)
    u = ()
    for j in tl.static_range(D):
        s_j = pre * (1.0 - 2.0 * ((SIGNS >> j) & 1))
        if IN_DTYPE == 2 or not CLAMP:         # fp16 never exceeds the clamp
            u = u + (xs[j] * s_j,)
        else:
            u = u + (clamp_keep_nan(xs[j], lim) * s_j,)
    return u


@triton.jit
def _stages(u, D: tl.constexpr, SPAN: tl.constexpr):
    """The butterfly's stages that pair tiles (j, j + 2^s) for every 2^s < SPAN (SPAN = D:
    all of them), Sylvester order."""
    for s in tl.static_range(5):
        if (1 << s) < SPAN:
            w = ()
            for j in tl.static_range(D):
                if (j & (1 << s)) == 0:
                    w = w + (u[j] + u[j + (1 << s)],)
                else:
                    w = w + (u[j - (1 << s)] - u[j],)
            u = w
    return u


@triton.jit
def rht_butterfly(xs, D: tl.constexpr, IN_DTYPE: tl.constexpr, SIGNS: tl.constexpr,
                  ROUND: tl.constexpr = True, CLAMP: tl.constexpr = True):
    """``y = x_chunk @ M`` for a chunk of D = 16 or 32 same-shaped tiles ``xs`` (element k of
    the chunk in ``xs[k]``), rounded to the input dtype: ``x_j·(±2^-e)`` (``s_j`` from the bit
    mask SIGNS; exact after the clamp to ``±L(D)``), the Walsh-Hadamard butterfly across the
    tiles (Sylvester order, ``H[j][k] = (-1)^popcount(j&k)``), then for D = 32 one multiply by
    fp32(sqrt 2) (``hadamard.rht_factors``). ``ROUND=False``: the fp32 values before
    :func:`finish_rotated`. ``CLAMP=False``: no clamp, for a caller that knows every ``|x_j|``
    is at most ``L(D)`` (the clamp is then the identity: the same bits)."""
    tl.static_assert(D == 16 or D == 32, "the in-thread RHT takes 16- or 32-chunks")
    u = _stages(_signed_chunk(xs, D, IN_DTYPE, SIGNS, CLAMP), D, D)
    y = ()
    for j in tl.static_range(D):
        v = u[j]
        if D == 32:                            # fp32(1/sqrt 32)·2^3
            v = v * 1.4142135381698608
        if ROUND:
            y = y + (finish_rotated(v, IN_DTYPE),)
        else:
            y = y + (v,)
    return y


@triton.jit
def rht_pair_maxima(xs, D: tl.constexpr, IN_DTYPE: tl.constexpr, SIGNS: tl.constexpr,
                    CLAMP: tl.constexpr = True):
    """``max(|y_j|, |y_{j+D/2}|)`` for j < D/2, of :func:`rht_butterfly`'s fp32 values before
    their rounding (``ROUND=False``), for an amax pass: the last stage turns ``(a, b)`` into
    ``a + b`` and ``a - b``, and ``max(|fl(a+b)|, |fl(a-b)|) = fl(|a| + |b|)`` exactly (one of
    the two is ``±(|a| + |b|)`` before rounding, the other no larger, and rounding is odd and
    monotone; NaN stays NaN, ``Inf - Inf`` gives the other's Inf). So D/2 additions replace D
    additions and D/2 of the D maxima, for the same bits."""
    tl.static_assert(D == 16 or D == 32, "the in-thread RHT takes 16- or 32-chunks")
    u = _stages(_signed_chunk(xs, D, IN_DTYPE, SIGNS, CLAMP), D, D // 2)
    y = ()
    for j in tl.static_range(D // 2):
        v = tl.abs(u[j]) + tl.abs(u[j + D // 2])
        if D == 32:
            v = v * 1.4142135381698608
        y = y + (v,)
    return y


@triton.jit
def finish_rotated(v, IN_DTYPE: tl.constexpr):
    """A rotated fp32 value as the RHT returns it: rounded to the input dtype (fp16 saturated
    first). Monotone and odd, so ``max|finish(y)| = finish(max|y|)``: an amax pass may run
    :func:`rht_butterfly` with ``ROUND=False`` and finish its maximum once."""
    if IN_DTYPE == 2:                      # fp16: rotated values can pass 65504
        v = clamp_keep_nan(v, 65504.0)
    return round_to_input_dtype(v, IN_DTYPE)   # bf16/fp32 hold every |y| <= 2^127


# ------------------------------------------------------------- bf16 pairs, two values a word
# A thread that holds whole bf16 RHT blocks can clamp, round and take maxima two values an
# instruction on the packed pairs (sm_80+ ``min/max.bf16x2``, ``cvt.rn.bf16x2.f32``) where
# fp32 takes one an element. The interpreter runs the same steps unpacked: the same bits.
@triton.jit
def bf16_halves(w):
    """The fp32 values of a word's low and high bf16 halves (``_utils.bf16_pair`` undone)."""
    return (w << 16).to(tl.float32, bitcast=True), (w & -65536).to(tl.float32, bitcast=True)


@triton.jit
def clamp_bf16_words(w):
    """bf16 pairs (int32 words) clamped to ``±L(16) = ±2^125``, NaN kept: the d = 16 RHT's
    input clamp of both values (:func:`rht_butterfly`'s ``CLAMP``) in one packed ``max.NaN``
    and one ``min.NaN`` (2^125 is a bf16 value, so clamping before the widening is the same)."""
    if _PACKED_PTX:
        out = tl.inline_asm_elementwise(
            "{ .reg .b32 lo, hi, t; mov.b32 lo, 0xFE00FE00; mov.b32 hi, 0x7E007E00; "
            "max.NaN.bf16x2 t, $1, lo; min.NaN.bf16x2 $0, t, hi; }",
            "=r,r", [w], dtype=tl.int32, is_pure=True, pack=1)
    else:
        lo, hi = bf16_halves(w)
        lim = 4.253529586511731e37             # 2^125 = L(16)
        out = bf16_pair(clamp_keep_nan(lo, lim), clamp_keep_nan(hi, lim))
    return out


@triton.jit
def clamp_bf16_chunk(words):
    """:func:`clamp_bf16_words` of each of a chunk's 16 word tiles (a column view's raw tiles)."""
    out = ()
    for j in tl.static_range(16):
        out = out + (clamp_bf16_words(words[j]),)
    return out


@triton.jit
def round_bf16_pair(a, b):
    """fp32 ``a``, ``b`` rounded to bf16 (RNE) as one word, ``a`` in the low half: one
    ``cvt.rn.bf16x2.f32`` for what took a conversion each (no saturation: the caller's values
    stay within bf16's range, e.g. every rotated ``|y| <= 2^127``)."""
    if _PACKED_PTX:
        out = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [a, b],
                                        dtype=tl.int32, is_pure=True, pack=1)
    else:
        out = bf16_pair(round_to_input_dtype(a, 1), round_to_input_dtype(b, 1))
    return out


@triton.jit
def _max_abs_words(w0, w1):
    """A word whose halves hold ``max(|.|)`` of the two words' low and of their high halves
    (signs unspecified; NaN dropped on the GPU, kept here: the caller flags a NaN block)."""
    if _PACKED_PTX:
        out = tl.inline_asm_elementwise("max.xorsign.abs.bf16x2 $0, $1, $2;", "=r,r,r",
                                        [w0, w1], dtype=tl.int32, is_pure=True, pack=1)
    else:
        lo0, hi0 = bf16_halves(w0)
        lo1, hi1 = bf16_halves(w1)
        out = bf16_pair(tl.maximum(tl.abs(lo0), tl.abs(lo1)),
                         tl.maximum(tl.abs(hi0), tl.abs(hi1)))
    return out


@triton.jit
def round_bf16_blocks(ys):
    """:func:`finish_rotated` (bf16) of the 16 fp32 values of RHT'd blocks ``ys`` (element k
    of every block in ``ys[k]``, :func:`rht_butterfly` with ``ROUND=False``) and the blocks'
    ``max |y|``, as ``(ys, vmax, bad)`` like ``_utils.rotated_block_max`` (``bad``: the block
    holds NaN; its ``vmax`` is meaningless). Pairs are rounded into words and the maxima taken
    on the words: 34 instructions a block (8 conversions, 16 widenings, 10 for the maximum)
    where one conversion and one widening a value and 15 maxima took 47."""
    words = ()
    for i in tl.static_range(8):
        words = words + (round_bf16_pair(ys[2 * i], ys[2 * i + 1]),)
    m = ()
    for i in tl.static_range(4):
        m = m + (_max_abs_words(words[2 * i], words[2 * i + 1]),)
    lo, hi = bf16_halves(_max_abs_words(_max_abs_words(m[0], m[1]), _max_abs_words(m[2], m[3])))
    out = ()
    for i in tl.static_range(8):
        y_lo, y_hi = bf16_halves(words[i])
        out = out + (y_lo, y_hi)
    return out, tl.maximum(tl.abs(lo), tl.abs(hi)), out[0] != out[0]


@triton.jit
def rotated_blocks(xs, IN_DTYPE: tl.constexpr, SIGNS: tl.constexpr):
    """``(ys, vmax, bad)`` of RHT'd 16-element blocks held one a thread (element k of every
    block in ``xs[k]``): the rotated values, the block maxima and the NaN flags (as
    ``_utils.rotated_block_max``). bf16: ``xs`` already clamped (:func:`clamp_bf16_words` on the
    raw pairs), rounded and maximized on pairs (:func:`round_bf16_blocks`); fp16: as
    :func:`rht_butterfly` rounds them (fp16 needs no clamp, its rounding a saturation)."""
    if IN_DTYPE == 1:
        ys, vmax, bad = round_bf16_blocks(rht_butterfly(xs, 16, 1, SIGNS, False, False))
    else:
        ys = rht_butterfly(xs, 16, IN_DTYPE, SIGNS)
        vmax, bad = rotated_block_max(ys)
    return ys, vmax, bad
