"""MXFP8 GEMM on FP8 tensor cores (Hopper, Ada): E4M3/E5M2 codes straight into ``tl.dot``.

``y = A Bᵀ`` for MXFP8 operands, both quantized along K in blocks of 32 with UE8M0 scales::

    y[m, n] = Σ_j  2^(ea[m, j] + eb[n, j] - 254) · P_j[m, n],   P_j = Σ_{k in chunk j} a[m,k]·b[n,k]

``P_j`` (32 products of FP8 codes) is what one FP8 MMA computes; the scale of chunk j differs
per row *and* per column, so it cannot join the accumulator's MMA chain: each chunk's partial
product is scaled on the CUDA cores before it is added. Since the scales are powers of two,
that multiply is exact (barring fp32 overflow/underflow, where the reference overflows too):
the result is the reference up to summation order.

**Cost, per output element and 32-wide K chunk.** The MMA does 32 multiply-adds; the scaling
costs the outer product ``sa_j[m]·sb_j[n]`` (one FMUL) and ``acc += P_j · s`` (one FFMA). On an
H100/H200 SM the FP8 tensor cores do 4096 MAC/clk and the CUDA cores 128 FP32 op/clk, so one
chunk of a BM×BN tile takes BM·BN/128 clocks of MMA and 2·BM·BN/128 of scaling: even with
perfect overlap the exact per-32 path is bounded at ~50% of FP8 peak (~990 TF/s, 1.25x the
790 TF/s of bf16 cuBLAS), and a Triton kernel does not overlap a warpgroup's scaling with its
own MMA (a dot whose result feeds arithmetic waits for the MMA), only with other CTAs'.
Other exact rewrites cost the same: folding ``2^(ea+eb)`` into the exponent bits (IADD3) is one
integer op plus the FADD; pre-scaling the operand codes is exact only when no bit is lost.

**Chains instead of chunks.** A K step of ``BK = 32·CH`` elements starts a fresh MMA chain;
before chunk c joins it, the kernel checks whether any row of the A tile or of the B tile has
a different exponent in chunk c than in chunk c-1. If none does, chunk c's MMA accumulates
into the same chain (same scales); otherwise the chain is first *flushed*, i.e. scaled by
chunk c-1's exponents and added to the fp32 total. A K step whose scales agree everywhere
costs one flush (``2·BM·BN`` ops) instead of CH. The test is one OR-reduction of per-row
change bits per tile and K step (uniform across the CTA, so no divergence), and only the
flush sits under the run-time ``if``: Triton's pipeliner streams loads into shared memory
ahead of use only for loads and dots at the top level of the loop (checked in the TTGIR).

Scales straight out of a quantizer rarely agree across a tile (a Gaussian row's 4 blocks of
a K step share an exponent ~70% of the time; 64 rows at once, essentially never), so
:func:`regroup_mx` first rewrites each operand, in one memory-bound pass, into the *same
values* with one exponent per (row, BK) wherever a shift of the codes is exact
(``quant/mx_regroup.py``): ~99.9% of Gaussian row groups, ~95% of 64-row tiles (outlier
channels: far fewer). Exactness never depends on the data; only the speed does.

**Precision.** Hopper's FP8 MMA adds the 32 products of one instruction (and a chain of them)
with a fixed-point alignment keeping ~14 bits below the largest term, not full fp32 (the
reason DeepSeek-V3 promotes every 128 K, and cuBLAS's blockwise FP8 does too). Here every
chain is at most BK long and starts from a fresh accumulator, and all sums across K steps are
fp32 on the CUDA cores: the error is that of one BK-long chunk, not of K.

**Expected speed (not yet measured; ``benchmarks/results/gemm_notes.md``).** From the sm_90
SASS, a one-chain K step costs ~620 issue slots per thread against 256 tensor-core clocks, so
even with two CTAs per SM overlapping, the kernel is ALU-bound near 40% of FP8 peak: ~1.0×
bf16 at 8192³ on data that regroups, ~0.6× on data that does not. The 1.4× target needs the
flush off the MMA's critical path (warp-specialised ping-pong, not available in Triton 3.6 on
Hopper) or cuBLASLt's 1×128 blockwise FP8 on operands quantized with shared 128-exponents.

Layout consumed (``tensor.py``): codes fp8 ``[rows, K]`` row-major (K contiguous), scales uint8
``[rows, K/32]``; K a multiple of 32. The same memory-bound pass that regroups (:func:`prepare_mx`)
also writes each operand's scales as fp32 (exactly ``formats.e8m0_decode``: byte 0 is 2^-127,
0xFF NaN): a flush then costs, per thread, its 64 FMUL+FFMA and one load per row/column of
its accumulator fragment instead of a byte load plus ~5 decode ops each (2708 → 1876 SASS
instructions for the default config, Triton 3.6, sm_90). An E4M3 NaN code (0x7F) reaches
the output as NaN. The tile configs
(:class:`MXFP8Config`) are chosen per shape by ``gemm_paths``; ``benchmarks/bench_gemm_sweep.py``
sweeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, _interpreting
from ..tensor import QFormat, QuantizedTensor
from ._utils import device_capability, grouped_tile, cdiv
from .gemm_fp8 import _interpreter_f32
from .gemm_mxfp8_prepare import check_operand, prepare_mx, prepare_mx_wgmma, regroup_mx

__all__ = [
    "DEFAULT_CONFIG",
    "SWEEP_CONFIGS",
    "MXFP8Config",
    "config_for",
    "has_fp8_tensor_cores",
    "prepare_mx",
    "prepare_mx_wgmma",
    "regroup_mx",
    "scaled_mm_mxfp8_fp8",
]


@dataclass(frozen=True)
class MXFP8Config:
    """Tile config of the FP8 tensor-core MXFP8 kernel. ``ch``: 32-wide chunks per K step."""

    bm: int = 64
    bn: int = 128
    ch: int = 4
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 4
    adaptive: bool = True      # take the one-chain path on K steps whose scales agree
    regroup: bool = True       # rewrite both operands first so that they mostly agree
    tma: bool = False          # TMA descriptors for the code tiles (GPU; the interpreter ignores it)

    def __str__(self) -> str:
        return (f"{self.bm}x{self.bn}x{32 * self.ch} w{self.num_warps} s{self.num_stages}"
                f"{' adaptive' if self.adaptive else ''}{' regroup' if self.regroup else ''}"
                f"{' tma' if self.tma else ''}")


# Default: one warpgroup on a 64×128 tile. Compiled for sm_90 (Triton 3.9, locally) it holds
# the fp32 accumulator and one chunk's partial in 198 registers without spilling, so two CTAs
# fit per SM (registers and 2 × 96 KB of 4-stage buffers) and one's scaling overlaps the
# other's MMA. 128×128 with 8 warps (the FP4 kernels' tile) spills at 255 registers.
DEFAULT_CONFIG = MXFP8Config(bm=64, bn=128, ch=4, num_warps=4, num_stages=4)
# What the benchmark sweeps: tile shape, K step, occupancy, and the two paths' switches.
SWEEP_CONFIGS = (
    DEFAULT_CONFIG,
    replace(DEFAULT_CONFIG, adaptive=False, regroup=False),
    replace(DEFAULT_CONFIG, regroup=False),
    replace(DEFAULT_CONFIG, num_stages=3),
    replace(DEFAULT_CONFIG, ch=2, num_stages=6),
    replace(DEFAULT_CONFIG, ch=8, num_stages=2),
    MXFP8Config(bm=64, bn=64, ch=4, num_warps=4, num_stages=4),
    MXFP8Config(bm=128, bn=64, ch=4, num_warps=4, num_stages=4),
    MXFP8Config(bm=128, bn=128, ch=4, num_warps=8, num_stages=3),
    MXFP8Config(bm=64, bn=256, ch=4, num_warps=8, num_stages=3),
    replace(DEFAULT_CONFIG, tma=True),
    replace(DEFAULT_CONFIG, tma=True, bn=64),
)


def config_for(m: int, n: int, k: int, sms: int = 132) -> MXFP8Config:
    """The per-shape default: :data:`DEFAULT_CONFIG`, or 64×64 tiles when 64×128 ones would
    not fill two CTAs per SM (e.g. a wgrad ``[640, T]·[2560, T]ᵀ``: 200 tiles of 64×128 on
    132 SMs). The per-shape table (``gemm_paths``) overrides it where measured."""
    if -(-m // DEFAULT_CONFIG.bm) * -(-n // DEFAULT_CONFIG.bn) < 2 * sms:
        return replace(DEFAULT_CONFIG, bn=64)
    return DEFAULT_CONFIG


def has_fp8_tensor_cores(device: torch.device) -> bool:
    """FP8 MMA exists from compute capability 8.9 (Ada) on; Triton's CPU interpreter too."""
    if device.type != "cuda":
        return _interpreting()
    return device_capability(device) >= (8, 9)


# ----------------------------------------------------------------------------- kernel
@triton.jit
def _chunk(ptr, row0, offs_r, rmask, stride_r, k, K, E5M2: tl.constexpr,
           DOT_F32: tl.constexpr, TMA: tl.constexpr):
    """One [R, 32] tile of FP8 codes at K offset k (zeros past the edges).

    With TMA, ``ptr`` is a tensor descriptor and the copy engine fetches the box (zero fill
    past the edges, no per-thread address or mask arithmetic). Otherwise ``ptr`` is typed fp8
    on the GPU, so that the tile goes from shared memory straight into the MMA (a bitcast in
    registers would cost a round trip); the interpreter gets uint8 bytes and fp32 values (its
    fp8 conversion misreads NaN/Inf).
    """
    if TMA:
        v = ptr.load([row0, k])
    else:
        offs_k = k + tl.arange(0, 32)
        v = tl.load(ptr + offs_r[:, None] * stride_r + offs_k[None, :],
                    mask=rmask[:, None] & (offs_k[None, :] < K), other=0.0)
        if DOT_F32:
            raw = v.to(tl.uint8)
            v = _interpreter_f32(raw.to(tl.float8e5 if E5M2 else tl.float8e4nv, bitcast=True),
                                 raw, E5M2)
    return v


@triton.jit
def _or(x, y):
    return x | y


@triton.jit
def _scale_vec(s_ptr, offs_r, rmask, stride_r, kb, KS):
    """The fp32 scale bits of K chunk kb for each row (int32 ``[R]``; 0 past the edges)."""
    kmask = (offs_r * 0 + kb) < KS          # a vector mask (the interpreter wants one)
    return tl.load(s_ptr + offs_r * stride_r + kb, mask=rmask & kmask, other=0)


@triton.jit
def _changes(s_ptr, offs_r, rmask, stride_r, kb0, KS, CH: tl.constexpr):
    """Bit c set: some row's scale differs between chunks c-1 and c of this K step (chunks
    past K never count). Row-local compares, then one OR-reduction over the tile."""
    prev = _scale_vec(s_ptr, offs_r, rmask, stride_r, kb0, KS)
    bits = tl.zeros_like(prev)
    for c in tl.static_range(1, CH):
        cur = _scale_vec(s_ptr, offs_r, rmask, stride_r, kb0 + c, KS)
        bits = bits | (((cur != prev) & (kb0 + c < KS)).to(tl.int32) << c)
        prev = cur
    return tl.reduce(bits, 0, _or)


@triton.jit
def _flush(acc, part, sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, stride_sam, stride_sbn,
           kb, KS):
    """``acc + part · 2^(ea_kb) ⊗ 2^(eb_kb)``: a finished MMA chain joins the fp32 total."""
    sa = _scale_vec(sa_ptr, offs_m, mmask, stride_sam, kb, KS).to(tl.float32, bitcast=True)
    sb = _scale_vec(sb_ptr, offs_n, nmask, stride_sbn, kb, KS).to(tl.float32, bitcast=True)
    return acc + (part * sa[:, None]) * sb[None, :]


@triton.jit
def _mxfp8_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, y_ptr, M, N, K, KS,
                  stride_am, stride_sam, stride_bn, stride_sbn, stride_ym,
                  A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, CH: tl.constexpr, GROUP_M: tl.constexpr,
                  ADAPTIVE: tl.constexpr, DOT_F32: tl.constexpr, TMA: tl.constexpr):
    """y = A Bᵀ for MXFP8 A [M, K], B [N, K]; one K step = CH chunks of 32.

    Each K step starts a fresh MMA chain; before chunk c the chain is flushed (scaled into
    the fp32 total) only if some row's scale changed from chunk c-1 (always, without
    ADAPTIVE). The loads and dots stay outside run-time branches: Triton's pipeliner streams
    such loads into shared memory ahead of use, and pipelines nothing inside an ``if``.
    """
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mmask, nmask = offs_m < M, offs_n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, 32 * CH):
        kb0 = k0 // 32
        if ADAPTIVE:
            change = _changes(sa_ptr, offs_m, mmask, stride_sam, kb0, KS, CH) | \
                _changes(sb_ptr, offs_n, nmask, stride_sbn, kb0, KS, CH)
        a = _chunk(a_ptr, pid_m * BM, offs_m, mmask, stride_am, k0, K, A_E5M2, DOT_F32, TMA)
        b = _chunk(b_ptr, pid_n * BN, offs_n, nmask, stride_bn, k0, K, B_E5M2, DOT_F32, TMA)
        part = tl.dot(a, tl.trans(b))
        for c in tl.static_range(1, CH):
            a = _chunk(a_ptr, pid_m * BM, offs_m, mmask, stride_am, k0 + 32 * c, K, A_E5M2,
                       DOT_F32, TMA)
            b = _chunk(b_ptr, pid_n * BN, offs_n, nmask, stride_bn, k0 + 32 * c, K, B_E5M2,
                       DOT_F32, TMA)
            if ADAPTIVE:
                if ((change >> c) & 1) != 0:
                    acc = _flush(acc, part, sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask,
                                 stride_sam, stride_sbn, kb0 + c - 1, KS)
                    part = tl.zeros_like(part)
            else:
                acc = _flush(acc, part, sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask,
                             stride_sam, stride_sbn, kb0 + c - 1, KS)
                part = tl.zeros_like(part)
            part = tl.dot(a, tl.trans(b), part)
        # a chain never flushes at chunks past K, so it ends with the last chunk inside K
        acc = _flush(acc, part, sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, stride_sam,
                     stride_sbn, tl.minimum(kb0 + CH - 1, KS - 1), KS)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


# ----------------------------------------------------------------------------- host side
def _tma_ok(a: torch.Tensor, b: torch.Tensor) -> bool:
    """TMA needs 16-byte aligned bases and row strides, and a Triton that has descriptors."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return all(t.data_ptr() % 16 == 0 and t.stride(0) % 16 == 0 for t in (a, b))


def scaled_mm_mxfp8_fp8(qa: QuantizedTensor, qb: QuantizedTensor,
                        out_dtype: torch.dtype = torch.float32,
                        config: MXFP8Config | None = None) -> torch.Tensor:
    """MXFP8 × MXFP8 (E4M3/E5M2, any pairing) ``A @ Bᵀ`` on FP8 tensor cores, ``[rows_a, rows_b]``
    (same contract as ``gemm.scaled_mm_reference``; the caller reshapes)."""
    cfg = config or DEFAULT_CONFIG
    for q in (qa, qb):
        check_operand(q)
    if out_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise KernelUnsupported(f"out_dtype {out_dtype}")
    if cfg.ch not in (1, 2, 4, 8):
        raise ValueError(f"MXFP8Config.ch must be 1, 2, 4 or 8, got {cfg.ch}")
    regroup = cfg.adaptive and cfg.regroup and cfg.ch > 1    # one chunk per step: nothing to unify
    qa, sa = prepare_mx(qa, 32 * cfg.ch, regroup)
    qb, sb = prepare_mx(qb, 32 * cfg.ch, regroup)
    interp = _interpreting()
    a, b = qa.data, qb.data
    m, k = a.shape
    n = b.shape[0]
    tma = cfg.tma and not interp and _tma_ok(a, b)
    a_arg, b_arg = a, b
    if interp:                       # the interpreter gets bytes (see _chunk)
        a_arg, b_arg = a.view(torch.uint8), b.view(torch.uint8)
    elif tma:                        # (the strides below are then unused by the kernel)
        from triton.tools.tensor_descriptor import TensorDescriptor
        a_arg = TensorDescriptor(a, [m, k], [a.stride(0), 1], [cfg.bm, 32])
        b_arg = TensorDescriptor(b, [n, k], [b.stride(0), 1], [cfg.bn, 32])
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    grid = (cdiv(m, cfg.bm) * cdiv(n, cfg.bn),)
    _mxfp8_kernel[grid](a_arg, sa, b_arg, sb, y, m, n, k, k // 32, a.stride(0), sa.stride(0),
                        b.stride(0), sb.stride(0), y.stride(0),
                        A_E5M2=qa.fmt == QFormat.MXFP8_E5M2, B_E5M2=qb.fmt == QFormat.MXFP8_E5M2,
                        BM=cfg.bm, BN=cfg.bn, CH=cfg.ch, GROUP_M=cfg.group_m,
                        ADAPTIVE=cfg.adaptive, DOT_F32=interp, TMA=tma, num_warps=cfg.num_warps,
                        num_stages=cfg.num_stages)
    return y
