"""Philox-4x32-10 with each round's two products taken as one 32 x 32 -> 64-bit multiply.

In-kernel SR draws a block's 128 random bits from Philox-4x32 with 10 rounds (Salmon et al.,
SC'11), the generator of ``tl.randint4x``: counter ``(offset, 0, 0, 0)``, key the seed's two
32-bit halves (the int32 seed sign-extended to 64 bits, as ``tl.randint4x`` takes it). A round
is, with the multipliers ``A = 0xD2511F53``, ``B = 0xCD9E8D57``::

    c0, c1, c2, c3 = hi(B·c2) ^ c1 ^ k0,  lo(B·c2),  hi(A·c0) ^ c3 ^ k1,  lo(A·c0)
    k0, k1 = k0 + 0x9E3779B9, k1 + 0xBB67AE85

``tl.randint4x`` writes ``hi`` and ``lo`` as two multiplies (PTX ``mul.hi.u32`` and
``mul.lo.u32``: two SASS instructions, ``IMAD.HI`` and ``IMAD``). :func:`philox4x32` forms
the 64-bit product once and splits it (inline PTX ``mul.wide.u32``, one ``IMAD.WIDE.U32``):
40 multiplies a block instead of 80, and fewer registers (the SR row kernel's codes tile: 126
-> 94). The same numbers, bit for bit
(``tests/test_kernels_nvfp4_row.py`` checks it against ``tl.randint4x`` in the interpreter,
the GPU test against the other kernels' draws).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._host import interpreting

__all__ = ["philox4x32", "philox_words"]

_ROUND_A = tl.constexpr(0xD2511F53)
_ROUND_B = tl.constexpr(0xCD9E8D57)
_KEY_A = tl.constexpr(0x9E3779B9)
_KEY_B = tl.constexpr(0xBB67AE85)
_PTX = tl.constexpr(not interpreting())        # where Triton compiles; the interpreter runs none


@triton.jit
def _mul_wide(c, M: tl.constexpr):
    """``(hi, lo)`` of the 64-bit product ``M · c`` (``c`` uint32, ``M`` one of the two round
    multipliers). On the GPU as PTX ``mul.wide.u32`` (a uint64 tensor makes Triton convert
    layouts: a shuffle a round); the interpreter, which runs no PTX, multiplies in uint64."""
    if _PTX:
        if M == _ROUND_A:
            asm: tl.constexpr = ("{ .reg .b64 t; mul.wide.u32 t, $2, 0xD2511F53; "
                                 "mov.b64 {$1, $0}, t; }")
        else:
            asm: tl.constexpr = ("{ .reg .b64 t; mul.wide.u32 t, $2, 0xCD9E8D57; "
                                 "mov.b64 {$1, $0}, t; }")
        hi, lo = tl.inline_asm_elementwise(asm, "=r,=r,r", [c], dtype=(tl.uint32, tl.uint32),
                                           is_pure=True, pack=1)
    else:
        p = c.to(tl.uint64) * M
        hi = (p >> 32).to(tl.uint32)
        lo = p.to(tl.uint32)
    return hi, lo


@triton.jit
def philox4x32(seed, offset, N_ROUNDS: tl.constexpr = 10):
    """``tl.randint4x(seed, offset)``'s four int32 words (``seed`` an int32 scalar, ``offset``
    an int32 tensor), each round's products as one wide multiply (module docstring)."""
    key = seed.to(tl.int64)
    k0 = key.to(tl.uint32)
    k1 = (key >> 32).to(tl.uint32)
    c0 = offset.to(tl.uint32, bitcast=True)
    c1 = c0 * 0
    c2 = c1
    c3 = c1
    for _ in tl.static_range(N_ROUNDS):
        hi_b, lo_b = _mul_wide(c2, _ROUND_B)
        hi_a, lo_a = _mul_wide(c0, _ROUND_A)
        c0 = hi_b ^ c1 ^ k0
        c2 = hi_a ^ c3 ^ k1
        c1 = lo_b
        c3 = lo_a
        k0 = k0 + _KEY_A
        k1 = k1 + _KEY_B
    return (c0.to(tl.int32, bitcast=True), c1.to(tl.int32, bitcast=True),
            c2.to(tl.int32, bitcast=True), c3.to(tl.int32, bitcast=True))


@triton.jit
def philox_words(seed, offset, WIDE: tl.constexpr):
    """The four Philox words of ``offset`` under ``seed``: :func:`philox4x32` where ``WIDE``,
    else ``tl.randint4x`` itself (the same words; the kernels' ``PHILOX_WIDE`` switches)."""
    if WIDE:
        w0, w1, w2, w3 = philox4x32(seed, offset)
    else:
        w0, w1, w2, w3 = tl.randint4x(seed, offset)
    return w0, w1, w2, w3
