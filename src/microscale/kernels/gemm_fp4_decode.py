"""Decoding block-scaled codes to bf16 ``value · block_scale`` in Triton, and the two kernels
of ``gemm_fp4`` that do it: the dequantize pass and the decode-in-main-loop GEMM.

The decode is bit arithmetic, not a table: placing the 3 magnitude bits of an E2M1 code at
bits 11..9 of an fp16 word (sign at bit 15) gives an fp16 equal to ``value · 2^-14`` (the
E2M1 exponent field lands in fp16's, the mantissa bit at fp16's top mantissa bit, code 1 as
an fp16 subnormal). The same move decodes E4M3 bytes (``value · 2^-8``) and E5M2 bytes
(exact: E5M2 is the top byte of an fp16); UE8M0 ``e`` is the fp32 bit pattern ``e << 23``
(``e = 0``: the subnormal 2^-127). The power-of-two corrections are applied to each element
(one multiply more than folding them into the block scale, which overflowed for scale bytes
>= 241, i.e. MXFP4 blocks with a max above ~2^116, and read byte 0 as 0: session 9). The
NaN bytes (E4M3 0x7F/0xFF, UE8M0 0xFF: a NaN block or element, from NaN input under
``check_finite=False``) decode to NaN, as in the reference, so a NaN reaches the output.

Kernel codes (``gemm_fp4``'s ``_ELEM_*`` / ``_SCALE_*``): ``ELEM`` 0 E2M1, 1 E4M3, 2 E5M2;
``SCALE`` 0 E4M3, 1 UE8M0.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._utils import grouped_tile

__all__: list[str] = []   # gemm_fp4 launches _dequant_kernel and _mainloop_kernel


# ----------------------------------------------------------------------------- decode helpers
@triton.jit
def _elem_bits_to_f32(c, ELEM: tl.constexpr):
    """Codes (uint8) to their exact fp32 values (E2M1, E4M3, E5M2)."""
    c16 = c.to(tl.uint16)
    if ELEM == 0:
        h = ((c16 & 7) << 9) | ((c16 & 8) << 12)
    elif ELEM == 1:
        h = ((c16 & 0x7F) << 7) | ((c16 & 0x80) << 8)
    else:
        h = c16 << 8
    v = h.to(tl.float16, bitcast=True).to(tl.float32)
    if ELEM == 0:   # the fp16 holds value · 2^-14 (E2M1) or value · 2^-8 (E4M3): undone
        v = v * 16384.0
    elif ELEM == 1:  # here, per element, so that no scale overflows when it would be folded in
        v = tl.where((c16 & 0x7F) == 0x7F, float("nan"), v * 256.0)  # NaN byte: NaN
    return v


@triton.jit
def _scale_to_f32(s, ELEM: tl.constexpr, SCALE: tl.constexpr):
    """Scale bytes to their exact fp32 values (NaN bytes: NaN)."""
    if SCALE == 0:  # E4M3 (positive): value · 2^-8 via the fp16 trick, undone below
        f = ((s.to(tl.uint16) & 0x7F) << 7).to(tl.float16, bitcast=True).to(tl.float32)
        f = tl.where((s & 0x7F) == 0x7F, float("nan"), f * 256.0)      # NaN byte: NaN
    else:           # UE8M0: 2^(e-127) is the fp32 whose exponent field is e; e = 0 is the
        #             subnormal 2^-127 (bit 22)
        bits = tl.where(s == 0, 0x400000, s.to(tl.uint32) << 23)
        f = bits.to(tl.uint32).to(tl.float32, bitcast=True)
        f = tl.where(s == 255, float("nan"), f)                         # NaN byte: NaN
    return f


@triton.jit
def _scaled_tile(codes, s_f32, BR: tl.constexpr, BC: tl.constexpr, GROUP: tl.constexpr,
                 ELEM: tl.constexpr, DOT_F32: tl.constexpr = False):
    """``decode(codes[BR, BC]) · scale`` where each scale covers GROUP consecutive columns.

    bf16 (exact); with DOT_F32 widened back to fp32, because Triton's CPU interpreter
    multiplies bf16 dot operands as raw integers (the GPU path never sets it).
    """
    v = _elem_bits_to_f32(codes, ELEM)
    v = tl.reshape(v, [BR, BC // GROUP, GROUP]) * s_f32[:, :, None]
    v = tl.reshape(v, [BR, BC]).to(tl.bfloat16)
    if DOT_F32:
        v = v.to(tl.float32)
    return v


@triton.jit
def _load_tile(ptr, s_ptr, offs_r, rmask, k0, KB, KS, stride_r, stride_sr,
               BR: tl.constexpr, BKB: tl.constexpr, NS: tl.constexpr):
    """Load a [BR, BKB] tile of code bytes and its [BR, NS] scale bytes (zeros past the edge)."""
    offs_k = k0 + tl.arange(0, BKB)
    codes = tl.load(ptr + offs_r[:, None] * stride_r + offs_k[None, :],
                    mask=rmask[:, None] & (offs_k[None, :] < KB), other=0)
    offs_s = (k0 // (BKB // NS)) + tl.arange(0, NS)
    sbytes = tl.load(s_ptr + offs_r[:, None] * stride_sr + offs_s[None, :],
                     mask=rmask[:, None] & (offs_s[None, :] < KS), other=0)
    return codes, sbytes


# ----------------------------------------------------------------------------- kernels
@triton.jit
def _mainloop_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, f_ptr, y_ptr, M, N, KB, KSA, KSB,
                     stride_am, stride_sam, stride_bn, stride_sbn, stride_ym,
                     ELEM_A: tl.constexpr, SCALE_A: tl.constexpr, NSA: tl.constexpr,
                     ELEM_B: tl.constexpr, SCALE_B: tl.constexpr, NSB: tl.constexpr,
                     PACKED: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     BKB: tl.constexpr, GROUP_M: tl.constexpr, DOT_F32: tl.constexpr):
    """y = f · A Bᵀ with A, B decoded tile by tile; KB = bytes per row along K."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mmask, nmask = offs_m < M, offs_n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, KB, BKB):
        ca, sa = _load_tile(a_ptr, sa_ptr, offs_m, mmask, k0, KB, KSA, stride_am, stride_sam,
                            BM, BKB, NSA)
        cb, sb = _load_tile(b_ptr, sb_ptr, offs_n, nmask, k0, KB, KSB, stride_bn, stride_sbn,
                            BN, BKB, NSB)
        if PACKED:  # even elements (low nibbles) and odd elements (high nibbles): two dots
            sa = _scale_to_f32(sa, ELEM_A, SCALE_A)
            sb = _scale_to_f32(sb, ELEM_B, SCALE_B)
            a_lo = _scaled_tile(ca & 0xF, sa, BM, BKB, BKB // NSA, ELEM_A, DOT_F32)
            b_lo = _scaled_tile(cb & 0xF, sb, BN, BKB, BKB // NSB, ELEM_B, DOT_F32)
            acc = tl.dot(a_lo, tl.trans(b_lo), acc)
            a_hi = _scaled_tile(ca >> 4, sa, BM, BKB, BKB // NSA, ELEM_A, DOT_F32)
            b_hi = _scaled_tile(cb >> 4, sb, BN, BKB, BKB // NSB, ELEM_B, DOT_F32)
            acc = tl.dot(a_hi, tl.trans(b_hi), acc)
        else:
            sa = _scale_to_f32(sa, ELEM_A, SCALE_A)
            sb = _scale_to_f32(sb, ELEM_B, SCALE_B)
            a_t = _scaled_tile(ca, sa, BM, BKB, BKB // NSA, ELEM_A, DOT_F32)
            b_t = _scaled_tile(cb, sb, BN, BKB, BKB // NSB, ELEM_B, DOT_F32)
            acc = tl.dot(a_t, tl.trans(b_t), acc)
    acc = acc * tl.load(f_ptr)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


@triton.jit
def _dequant_kernel(x_ptr, s_ptr, y_ptr, R, KB, KS, stride_xr, stride_sr, stride_yr,
                    ELEM: tl.constexpr, SCALE: tl.constexpr, NS: tl.constexpr,
                    PACKED: tl.constexpr, PERMUTE_K: tl.constexpr, BR: tl.constexpr,
                    BKB: tl.constexpr):
    """y = value · block scale as bf16, [R, K].

    FP4 bytes hold element pairs. In natural order they are split back (2j, 2j+1); with
    PERMUTE_K each BKB-byte chunk is written as its BKB even elements, then its BKB odd ones.
    A GEMM does not care in which order K is visited as long as A and B agree, and the
    permuted store skips a register shuffle.
    """
    offs_r = tl.program_id(0) * BR + tl.arange(0, BR)
    k0 = tl.program_id(1) * BKB
    rmask = offs_r < R
    codes, sbytes = _load_tile(x_ptr, s_ptr, offs_r, rmask, k0, KB, KS, stride_xr, stride_sr,
                               BR, BKB, NS)
    s = _scale_to_f32(sbytes, ELEM, SCALE)
    y_rows = y_ptr + offs_r[:, None] * stride_yr
    if PACKED:
        lo = _scaled_tile(codes & 0xF, s, BR, BKB, BKB // NS, ELEM)
        hi = _scaled_tile(codes >> 4, s, BR, BKB, BKB // NS, ELEM)
        if PERMUTE_K:   # a last, partial chunk of `chunk` bytes keeps the same rule
            chunk = tl.minimum(KB - k0, BKB)
            offs_j = tl.arange(0, BKB)
            mask = rmask[:, None] & (offs_j[None, :] < chunk)
            tl.store(y_rows + 2 * k0 + offs_j[None, :], lo, mask=mask)
            tl.store(y_rows + 2 * k0 + chunk + offs_j[None, :], hi, mask=mask)
        else:
            vals = tl.reshape(tl.join(lo, hi), [BR, 2 * BKB])   # element 2j, then 2j+1
            offs_k = 2 * k0 + tl.arange(0, 2 * BKB)
            tl.store(y_rows + offs_k[None, :], vals,
                     mask=rmask[:, None] & (offs_k[None, :] < 2 * KB))
    else:
        vals = _scaled_tile(codes, s, BR, BKB, BKB // NS, ELEM)
        offs_k = k0 + tl.arange(0, BKB)
        tl.store(y_rows + offs_k[None, :], vals, mask=rmask[:, None] & (offs_k[None, :] < KB))

