"""E2M1 rounding in Triton: codes for the packed views, values for the expanded ones.

The E2M1 grid is ``0, 0.5, 1, 1.5, 2, 3, 4, 6``: below 2 a uniform step of 0.5 (the subnormal
0.5 included), then one mantissa bit per binade (step 1 in [2, 4), 2 in [4, 8)). So within
the binade of ``a`` (``binade = 2^max(floor(log2 a), 0)``: 1, 2 or 4) the grid is the
multiples of ``step = binade / 2``, and rounding to it is rounding to an integer count of steps.

**Codes** (:func:`e2m1_mag_code`, :func:`e2m1_sr_mag_code`) use the threshold comparisons of
``formats.e2m1_encode`` and the SR recipe of ``formats.e2m1_stochastic_encode`` (SPEC §5):
``rint(a / step) + offset`` with the ``+1.5·2^23`` trick, read off the fp32 bits.

**Values** (:func:`e2m1_rne_mag`, :func:`e2m1_sr_mag`) are what an expanded view stores
(``value · block scale``, ``tensor.py``): the code is never needed, so the value is rounded
in floating point straight away, with the binade read off ``a``'s exponent bits:

* RNE: ``m = 1.5 · 2^22 · binade`` has an ulp of ``step`` and stays in its binade when ``a``
  (≤ 6) is added, so ``(a + m) - m`` is ``a`` rounded to a multiple of ``step``, ties to the
  even multiple. Even multiples of the step are the even codes at every binade (1 = 2·0.5 is
  code 2, 2 = 4·0.5 code 4, 4 = 2·2 code 6), so this is SPEC §1's rounding; ``a`` at a binade's
  top (1.75, 3.5, 5 → 2, 4, 4) rounds into the next binade's first grid value, as it should.
* SR: ``t = a + u · step(a)`` exactly as the code path computes it, then
  ``floor(t / step(a)) · step(a)``. The spec floors with ``step(t)``; the two agree because
  ``t < a + step(a)``: t lies below the grid value after ``a``'s upper neighbour, and when t
  crosses into the next binade that neighbour is the binade's first value, a multiple of both
  steps. ``a`` ≤ 6 keeps ``t < 8`` and the result ≤ 6 (no clamp needed).

**SR on the GPU without conversions** (:func:`_sr_sum`, :func:`_sr_grid_bits`): the SR path above
costs two instructions of the GPU's slow conversion pipe an element (the byte's int -> float,
and the floor), a quarter of the FMA rate. Neither is needed:

* ``u · step`` from the byte's bits: ``binade · (1 + r/512)`` is the fp32 number with the
  binade's exponent and the byte as its mantissa bits 14-21 (one OR), and minus the binade
  it is ``binade · r/512 = u · step`` exactly (Sterbenz), so ``t = a + (that - binade)`` is
  the same fp32 sum.
* The floor onto the grid is ``t · 2^-126`` rounded toward zero (PTX ``mul.rz.f32``,
  subnormals kept): as for :func:`_grid_bits`, that scaling maps the E2M1 grid onto
  fp32's exponent field and top mantissa bit, and the truncation keeps only those, so the
  bits >> 22 are the floored code (0.5·floor(2t) below 1, one mantissa bit above; ``t < 8``
  keeps it ≤ 6). Triton's interpreter runs no PTX, so it floors as above (the same numbers:
  ``tests/test_e2m1_values.py`` checks both, the PTX one on the GPU and as a float64 model).

Both take ~5 fp32/integer instructions an element where code-then-decode took ~20
(thresholds, selects, the fp16 decode trick); the sign is OR-ed back from the input (so
``-0`` stays ``-0``, as code 8 decodes). ``tests/test_e2m1_values.py`` checks the values
against the codes' decode over every bf16 input and random bytes, in the interpreter.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._host import interpreting
from ._utils import e4m3_value

__all__ = ["e2m1_mag_code", "e2m1_sr_mag_code", "sign_nibble", "e2m1_code", "e2m1_sr_code",
           "scaled_e2m1_code", "scaled_e2m1_code_fast", "scaled_e2m1_nibble",
           "e2m1_rne_mag", "e2m1_sr_mag", "e2m1_round_value", "nvfp4_expanded_value"]

# PTX for the SR floor (``mul.rz``) where Triton compiles; the interpreter runs none.
_RZ_PTX = tl.constexpr(not interpreting())


# --------------------------------------------------------------------------- codes
@triton.jit
def e2m1_mag_code(a):
    """RNE E2M1 magnitude code (int32 0..7) of ``a`` in [0, 6].

    Within a binade the grid is uniform (step 0.5 below 2, 1 below 4, 2 above), so the code
    is ``rint(a / step) + offset``; rint is the ``+1.5*2^23`` trick, whose integer is read
    straight off the fp32 bits. Ties go to the even integer, which is the even code, as
    SPEC §1 asks (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4).
    """
    inv_step = tl.where(a < 2.0, 2.0, tl.where(a < 4.0, 1.0, 0.5))
    off = tl.where(a < 2.0, 0, tl.where(a < 4.0, 2, 4))
    t = a * inv_step + 12582912.0                      # exact product; one RNE rounding
    return t.to(tl.int32, bitcast=True) - 0x4B400000 + off


@triton.jit
def e2m1_sr_mag_code(a, rbyte):
    """Stochastic E2M1 magnitude code from a random byte (int32 0..255), SPEC §5."""
    u = rbyte.to(tl.float32) * 0.00390625
    t = a + u * tl.where(a < 2.0, 0.5, tl.where(a < 4.0, 1.0, 2.0))   # u*step is exact
    inv_step = tl.where(t < 2.0, 2.0, tl.where(t < 4.0, 1.0, 0.5))
    off = tl.where(t < 2.0, 0, tl.where(t < 4.0, 2, 4))
    n = tl.floor(t * inv_step) + 12582912.0            # t < 8, so the code never passes 7
    return n.to(tl.int32, bitcast=True) - 0x4B400000 + off


@triton.jit
def sign_nibble(x):
    """E2M1 sign bit (8 or 0) of fp32 ``x``; -0.0 keeps it."""
    return (x.to(tl.int32, bitcast=True) >> 28) & 8


@triton.jit
def e2m1_code(y):
    """RNE E2M1 code (int32 0..15) of fp32 ``y``, as ``formats.e2m1_encode``."""
    return e2m1_mag_code(tl.minimum(tl.abs(y), 6.0)) | sign_nibble(y)


@triton.jit
def e2m1_sr_code(y, rbyte):
    """Stochastic E2M1 code (int32 0..15) of fp32 ``y``."""
    return e2m1_sr_mag_code(tl.minimum(tl.abs(y), 6.0), rbyte) | sign_nibble(y)


@triton.jit
def scaled_e2m1_code(v, enc, rbyte, SR: tl.constexpr, FAST: tl.constexpr = False):
    """NVFP4 step 5: the E2M1 code of ``clamp(v·enc, ±6)``, RNE or (SR) stochastic with the
    random byte ``rbyte`` (ignored for RNE). ``FAST``: through the rounded value
    (:func:`scaled_e2m1_code_fast`; the same codes)."""
    if FAST:
        code = scaled_e2m1_code_fast(v, enc, rbyte, SR)
    elif SR:
        code = e2m1_sr_code(v * enc, rbyte)
    else:
        code = e2m1_code(v * enc)
    return code


@triton.jit
def _grid_bits(v, enc, rbyte, SR: tl.constexpr, rpos=None):
    """``(y, bits)``: ``y = v · enc`` and the fp32 bits of the E2M1 magnitude of ``clamp(y,
    ±6)`` (RNE, or SR with ``rbyte``; ``rpos``: :func:`_sr_sum`'s) times 2^-126, whose bits
    >> 22 are its code.

    E2M1 is a float with a 1-bit mantissa whose smallest normal is 1 and whose one subnormal
    is 0.5; fp32 scaled by 2^-126 is the same picture at fp32's own smallest normal. So a grid
    magnitude times 2^-126 is exact (0.5 lands on the subnormal 2^-127) and its exponent field
    and top mantissa bit are the magnitude code: 0.5 -> 1, 1 -> 2, 1.5 -> 3, 6 -> 7. A few
    instructions instead of the compare-and-select chain of :func:`e2m1_mag_code`; it needs
    fp32 subnormals kept (PTX without ``.ftz``, as Triton emits it)."""
    y = v * enc
    a = tl.minimum(tl.abs(y), 6.0)
    if SR:
        bits = _sr_grid_bits(a, rbyte, rpos)
    else:
        bits = _rne_grid_bits(a)
    return y, bits


@triton.jit
def scaled_e2m1_code_fast(v, enc, rbyte, SR: tl.constexpr):
    """:func:`scaled_e2m1_code` through the rounded value (:func:`_grid_bits`): the same
    codes (``tests/test_e2m1_values.py`` over every bf16 pattern and random bytes)."""
    y, bits = _grid_bits(v, enc, rbyte, SR)
    return (bits >> 22) | sign_nibble(y)


@triton.jit
def scaled_e2m1_nibble(v, enc, rbyte, SR: tl.constexpr, s, rpos=None):
    """:func:`scaled_e2m1_code_fast`'s code already at bit ``s`` of a packed word (``s`` a
    multiple of 4, at most 28, a constexpr or known per element at compile time), so that
    packing is an OR. The grid bits hold the magnitude code at bits 22-24 (RNE: nothing else,
    :func:`_rne_grid_bits`; SR: the truncated bits below, masked off), moved by one shift; the
    sign is ``y``'s bit 31 moved to bit ``s + 3``. Compiled, ~3 instructions an element for
    what took ~5 (the shift to the code, the sign's shift and merge, the shift into place,
    the sum). ``rpos``: the random byte is byte ``rpos`` of the word ``rbyte`` (``_sr_sum``)."""
    y, bits = _grid_bits(v, enc, rbyte, SR, rpos)
    # (above bit 22, the code itself shifted: ptxas 12.8 once dropped an element's ``bits << 6``
    # from a packed word, session 41; ``(bits >> 22) << 28`` compiled right)
    mag = tl.where(s <= 22, bits >> tl.maximum(22 - s, 0), (bits >> 22) << tl.maximum(s, 22))
    if SR:                                  # the truncated bits below the code
        mag = mag & (7 << s)
    sign = (y.to(tl.uint32, bitcast=True) >> tl.cast(28 - s, tl.uint32)) \
        & tl.cast(8 << s, tl.uint32)                  # (bit 31 when s is 28: unsigned)
    return mag | sign.to(tl.int32, bitcast=True)


@triton.jit
def _rne_grid_bits(a):
    """The fp32 bits of RNE's E2M1 magnitude of ``a`` (in [0, 6]) times 2^-126, whose bits
    >> 22 are its code (:func:`_grid_bits`). Compiled, the rounding happens in that
    scaled domain: ``m' = m · 2^-126`` (``m`` :func:`e2m1_rne_mag`'s magic, whose ulp is the
    step) has the bits ``binade - 0x33C00000``, one integer max-add from ``a``'s exponent
    bits; one fused multiply-add ``a · 2^-126 + m'`` rounds the exact sum once, at the step
    scaled by 2^-126 (a normal number, so scaling commutes with rounding); minus ``m'`` it is
    the scaled grid value, exactly (a subnormal for 0.5, kept). Five instructions where the
    unscaled rounding and the scaling took six. The interpreter's ``fma`` rounds the product
    first, so there the value is rounded unscaled and scaled after (the same bits;
    ``tests/test_e2m1_values.py`` models the fused one)."""
    if _RZ_PTX:
        bits_m = tl.inline_asm_elementwise(          # one VIADDMNMX (LLVM would reorder)
            "{ .reg .s32 t; sub.s32 t, $1, 868220928; max.s32 $0, t, 197132288; }", "=r,r",
            [a.to(tl.int32, bitcast=True) & 0x7F800000], dtype=tl.int32, is_pure=True, pack=1)
        m = bits_m.to(tl.float32, bitcast=True)
        bits = (tl.fma(a, 1.1754943508222875e-38, m) - m).to(tl.int32, bitcast=True)
    else:
        bits = (e2m1_rne_mag(a) * 1.1754943508222875e-38).to(tl.int32, bitcast=True)
    return bits


# --------------------------------------------------------------------------- values
@triton.jit
def _binade(a):
    """``2^max(floor(log2 a), 0)`` for ``a`` in [0, 6]: 1.0, 2.0 or 4.0 (exponent bits kept,
    mantissa cleared; zero and subnormals read 0, raised to 1)."""
    return tl.maximum((a.to(tl.int32, bitcast=True) & 0x7F800000).to(tl.float32, bitcast=True),
                      1.0)


@triton.jit
def e2m1_rne_mag(a):
    """RNE E2M1 magnitude of ``a`` in [0, 6], as an fp32 value (module docstring)."""
    m = _binade(a) * 6291456.0                          # 1.5·2^22·binade: ulp = step
    return (a + m) - m


@triton.jit
def _sr_sum(a, rbyte, rpos=None):
    """SPEC §5's ``t = a + u · step(a)`` (``u = rbyte / 256``, ``step = binade / 2``) and the
    binade's fp32 bits, without an int -> float conversion: ``binade · (1 + rbyte / 512)`` is
    the binade's exponent with the byte as its mantissa bits 14-21, and minus the binade it
    is ``u · step`` exactly (module docstring).

    ``rpos`` given: the byte is byte ``rpos`` (0-3) of the 32-bit word ``rbyte`` (a Philox
    word), placed by one byte permute: ``64 · binade · (1 + r / 2^15)`` holds it as mantissa
    bits 8-15, a whole byte, so PTX ``prmt`` moves it there from any byte of the word (byte 0
    and the exponent from ``64 · binade``, whose mantissa is zero), where the shift and mask
    to bits 14-21 took two instructions; minus ``64 · binade`` it is the same ``u · step``
    (Sterbenz), and ``64 · binade`` is one add-and-max from ``a``'s exponent bits."""
    a_exp = a.to(tl.int32, bitcast=True) & 0x7F800000
    if rpos is None:
        binade = tl.maximum(a_exp, 0x3F800000)                   # 1, 2 or 4
        one_u = ((rbyte << 14) | binade).to(tl.float32, bitcast=True)
        t = a + (one_u - binade.to(tl.float32, bitcast=True))
    else:
        t, binade = _sr_sum_bytes(a, a_exp, rbyte, rpos)
    return t, binade


@triton.jit
def _sr_sum_bytes(a, a_exp, word, rpos):
    """:func:`_sr_sum` with the byte ``rpos`` of ``word``: ``(t, binade)``."""
    if _RZ_PTX:
        b64 = tl.inline_asm_elementwise(           # one VIADDMNMX: max(e + 6·2^23, bits of 64)
            "{ .reg .s32 t; add.s32 t, $1, 50331648; max.s32 $0, t, 1115684864; }", "=r,r",
            [a_exp], dtype=tl.int32, is_pure=True, pack=1)
        one_u = tl.inline_asm_elementwise(
            "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [word, b64, 0x7604 | (rpos << 4)],
            dtype=tl.int32, is_pure=True, pack=1)
    else:
        b64 = tl.maximum(a_exp + 0x03000000, 0x42800000)         # 64 · (1, 2 or 4)
        one_u = b64 | (((word >> (8 * rpos)) & 255) << 8)
    t = a + (one_u.to(tl.float32, bitcast=True) - b64.to(tl.float32, bitcast=True))
    return t, b64 - 0x03000000


@triton.jit
def _sr_grid_bits(a, rbyte, rpos=None):
    """The fp32 bits of SR's E2M1 magnitude of ``a`` times 2^-126: its code is bits >> 22
    (:func:`_grid_bits`), its value the bits masked to 0x7FC00000 times
    2^126. On the GPU, ``t · 2^-126`` rounded toward zero (PTX ``mul.rz.f32``, without
    ``.ftz``: the subnormal 2^-127, the grid's 0.5, is kept), whose truncation is the floor
    onto the grid (module docstring); the interpreter, which runs no PTX, floors ``t / step``."""
    t, binade = _sr_sum(a, rbyte, rpos)
    if _RZ_PTX:
        bits = tl.inline_asm_elementwise("mul.rz.f32 $0, $1, 0f00800000;", "=r,r",
                                         [t.to(tl.int32, bitcast=True)], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:                                           # 1 / step = 2 / binade, exact
        inv = (0x7F800000 - binade).to(tl.float32, bitcast=True)
        mag = tl.floor(t * inv) * (binade.to(tl.float32, bitcast=True) * 0.5)
        bits = (mag * 1.1754943508222875e-38).to(tl.int32, bitcast=True)
    return bits


@triton.jit
def e2m1_sr_mag(a, rbyte):
    """Stochastic E2M1 magnitude of ``a`` in [0, 6] from a random byte (int32 0..255), as an
    fp32 value: the value of :func:`e2m1_sr_mag_code`'s code (module docstring)."""
    bits = _sr_grid_bits(a, rbyte) & 0x7FC00000
    return bits.to(tl.float32, bitcast=True) * 8.507059173023462e37


@triton.jit
def e2m1_round_value(y, rbyte, SR: tl.constexpr):
    """The signed fp32 value of the E2M1 code of ``clamp(y, ±6)`` (:func:`e2m1_code`, or
    :func:`e2m1_sr_code` with the random byte ``rbyte`` if SR); the sign bit is ``y``'s."""
    a = tl.minimum(tl.abs(y), 6.0)
    if SR:
        mag = e2m1_sr_mag(a, rbyte)
    else:
        mag = e2m1_rne_mag(a)
    sign = y.to(tl.int32, bitcast=True) & -2147483648
    return (mag.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def nvfp4_expanded_value(v, enc, rbyte, scale_byte, SR: tl.constexpr):
    """The expanded NVFP4 element of ``v`` (``tensor.py``): the value of
    ``scaled_e2m1_code(v, enc, rbyte, SR)``'s code times the block's E4M3 scale, without the
    code. Exact (≤ 6 significant bits: a bf16 number); NaN where the scale is the NaN byte."""
    s = tl.where(scale_byte == 127, float("nan"), e4m3_value(scale_byte))
    return e2m1_round_value(v * enc, rbyte, SR) * s
