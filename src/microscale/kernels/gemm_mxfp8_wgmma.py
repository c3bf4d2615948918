"""MXFP8 GEMM on Hopper's FP8 tensor cores, written in Gluon so that the MMA is explicit.

Same product as :mod:`.gemm_mxfp8` (``y = A Bᵀ``, both operands MXFP8 along K)::

    y[m, n] = Σ_j 2^(ea[m, j] + eb[n, j] - 254) · P_j[m, n],  P_j = Σ_{k in chunk j} a[m,k]·b[n,k]

Why a second kernel. In Triton's ``tl`` every ``tl.dot`` whose result feeds arithmetic is
followed by a full ``wgmma`` wait, so a K step's four 32-wide chunks run as four waited MMAs
and the tensor cores idle through every scale exchange (the ``tl`` kernel: 0.12–0.28× bf16,
session 29). Gluon exposes the Hopper instructions: ``warpgroup_mma(..., is_async=True)``
issues a chain of MMAs, ``warpgroup_mma_wait`` waits for it, TMA and mbarriers move the tiles,
and ``warp_specialize`` splits the CTA into roles.

**Chains.** A *chain* is one K step of 128 (four chunks, one ``wgmma`` group, one wait) when
every row of the warpgroup's 64 rows of A and of the CTA's 128 rows of B has one exponent
across the step's chunks, else a single chunk. :func:`~.gemm_mxfp8_prepare.prepare_mx_wgmma`
(regroup, memory-bound) makes most steps uniform on ordinary data and writes the flags; each
consumer warpgroup ANDs its A flag with B's (a branch uniform across the warpgroup).
Exactness never depends on the path: chains start from zero, hold at most 128 products (as
DeepSeek-V3's and cuBLAS's blockwise FP8 promote every 128), and every sum across chains is
fp32 on the CUDA cores with exact power-of-two scales (``acc + P · sa ⊗ sb``): the reference
up to summation order and the tensor core's chain alignment (SPEC N5).

**Roles and layout.** A CTA owns a 128×128 output tile. A loader warp TMAs each K step's
[128, 128] code tiles of A and B and the step's fp32 scales ([4, 128] boxes of the K-step-major
arrays) into a ring of ``STAGES`` shared-memory stages (ready/empty mbarriers). Two consumer
warpgroups own 64 rows each: per step they issue their chain(s), wait for their own, scale them
into the fp32 total (two fp32 tiles a thread, 64 registers each; the scales read from the
stage) and release the stage; while one warpgroup scales, the other's chain keeps the tensor
cores busy.

**Where it stands** (H200, session 30; ``benchmarks/results/gemm_notes.md``): every step one
chain 1.18× bf16, every step per chunk 0.64×, Gaussian data 0.94× (0.84× with the prepare
pass): 4× the ``tl`` kernel, under dequantize + cuBLAS, so still opt-in. The uniform path is
bound by shared-memory bandwidth (per K step the two warpgroups' MMAs read A 2 × 8 KB and B
2 × 16 KB and the TMA writes 36 KB: ~660 clocks at 128 B/clk against 512 of MMA); what binds
the per-chunk steps is open (neither MMA latency nor the scaling arithmetic, both A/B'd).

Hopper only (``warpgroup_mma``), no interpreter: its reference twin is
``gemm.scaled_mm_reference`` (GPU tests); on CPU, CI checks the prepare pass bit-exact, the
prepared operands consumed as this kernel reads them, and that it compiles for sm_90 with the
installed Triton (Gluon's API moved between Triton 3.6 and 3.9; both are handled below).
"""

from __future__ import annotations

import torch

from ..backend import KernelUnsupported
from ..tensor import QuantizedTensor
from ._utils import cdiv, device_capability

try:                                     # Gluon ships with Triton >= 3.5
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language import _core as gl_core
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    HAVE_GLUON = True
except ImportError:                      # pragma: no cover - older Triton
    HAVE_GLUON = False

if HAVE_GLUON:
    # Gluon's API is experimental and moved between the Triton releases torch 2.11-2.13 pin
    # (3.6 .. 3.9): the TMA load is ``async_copy_global_to_shared`` in 3.6, ``async_load`` in
    # 3.9 (where the old name raises); a descriptor's ``_reinterpret`` became ``reinterpret``.
    # Both spellings resolve here, once, to what the installed Triton has.
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

    @gl_core.builtin
    def _reinterpret(desc, dtype, shape, layout, _semantic=None):
        """``desc`` seen as ``(dtype, shape, layout)`` (no copy)."""
        unwrap = gl_core._unwrap_if_constexpr
        return _semantic.memdesc_reinterpret(desc, unwrap(dtype), [unwrap(n) for n in shape],
                                             unwrap(layout))

__all__ = ["BM", "BN", "HAVE_GLUON", "available", "launch", "scaled_mm_mxfp8_wgmma"]

BM, BN, BK = 128, 128, 128               # output tile; K step = 4 chunks of 32
STAGES = 4                               # 4 × 36 KB (code tiles + scales) in flight
CONSUMER_REGS = 232                      # the second consumer warpgroup's register budget


def available(device: torch.device) -> bool:
    """Hopper (9.x) with a Triton that has Gluon."""
    return HAVE_GLUON and device.type == "cuda" and device_capability(device)[0] == 9


if HAVE_GLUON:
    @gluon.jit
    def _loader(a_desc, b_desc, sa_desc, sb_desc, a_smem, b_smem, sa_smem, sb_smem, ready,
                empty, off_m, off_n, NSTEP):
        """The loader warp: TMA each K step's code tiles and their fp32 scales (``[4, 128]``
        boxes of the K-step-major scale arrays) into the ring, once both consumer warpgroups
        have released the stage (``empty``: two arrivals)."""
        STAGES: gl.constexpr = a_smem.shape[0]
        BK: gl.constexpr = a_smem.shape[2]
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes + \
            sa_desc.block_type.nbytes + sb_desc.block_type.nbytes
        for s in range(NSTEP):
            st = s % STAGES
            mbarrier.wait(empty.index(st), ((s // STAGES) & 1) ^ 1)
            bar = ready.index(st)
            mbarrier.expect(bar, nbytes)
            _tma_load(a_desc, [off_m, s * BK], bar, a_smem.index(st))
            _tma_load(b_desc, [off_n, s * BK], bar, b_smem.index(st))
            _tma_load(sa_desc, [4 * s, off_m], bar, sa_smem.index(st))
            _tma_load(sb_desc, [4 * s, off_n], bar, sb_smem.index(st))

    @gluon.jit
    def _chain(a_t, b_t, acc, part, sa_t, sb_t, c: gl.constexpr, WG: gl.constexpr):
        """One MMA chain ``P = a_t · b_tᵀ`` from a fresh accumulator (written into the dead
        tile ``part``), then ``(acc + P · sa ⊗ sb, P)`` with chunk ``c``'s scales from the
        stage (``sa_t``/``sb_t``: ``[4, 128]`` fp32 in shared memory, seen flat; powers of two,
        so the products are exact). The warpgroup waits for its own chain; the other consumer
        warpgroup's chain keeps the tensor cores busy meanwhile."""
        layout: gl.constexpr = part.type.layout
        part = warpgroup_mma(a_t, b_t.permute((1, 0)), part, use_acc=False, is_async=True)
        sa = sa_t.slice(c * sa_t.shape[0] // 4 + 64 * WG, 64).load(gl.SliceLayout(1, layout))
        sb = sb_t.slice(c * sb_t.shape[0] // 4, sb_t.shape[0] // 4).load(
            gl.SliceLayout(0, layout))
        part = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        return acc + (part * sa[:, None]) * sb[None, :], part

    @gluon.jit
    def _consumer(a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                  NSTEP, stride_ym, pid_m, pid_n, WG: gl.constexpr):
        """Rows ``[64·WG, 64·WG + 64)`` of the CTA's tile: per K step one chain (uniform
        exponents) or four, each flushed into the fp32 total, then the stage released."""
        STAGES: gl.constexpr = a_smem.shape[0]
        BM: gl.constexpr = a_smem.shape[1]
        BN: gl.constexpr = b_smem.shape[1]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
        acc = gl.zeros([64, BN], gl.float32, layout)
        part = gl.zeros([64, BN], gl.float32, layout)       # the chain's tile
        ua_ptr += (2 * pid_m + WG) * NSTEP                  # A's flags per 64 rows, B's per 128
        ub_ptr += pid_n * NSTEP
        uni_next = gl.load(ua_ptr) & gl.load(ub_ptr)
        for s in range(NSTEP):
            st = s % STAGES
            uni = uni_next                                  # (loaded a step ahead)
            more = s + 1 < NSTEP
            uni_next = gl.load(ua_ptr + s + 1, mask=more, other=0) & \
                gl.load(ub_ptr + s + 1, mask=more, other=0)
            mbarrier.wait(ready.index(st), (s // STAGES) & 1)
            a_t = a_smem.index(st).slice(64 * WG, 64, dim=0)
            b_t = b_smem.index(st)
            flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])   # (unswizzled boxes)
            sa_t = _reinterpret(sa_smem.index(st), gl.float32, [4 * BM], flat)
            sb_t = _reinterpret(sb_smem.index(st), gl.float32, [4 * BN], flat)
            if uni != 0:                            # one chain of 4 chunks
                acc, part = _chain(a_t, b_t, acc, part, sa_t, sb_t, 0, WG)
            else:                                   # a chain per chunk
                for c in gl.static_range(4):
                    acc, part = _chain(a_t.slice(32 * c, 32, dim=1),
                                       b_t.slice(32 * c, 32, dim=1), acc, part, sa_t, sb_t, c,
                                       WG)
            mbarrier.arrive(empty.index(st), count=1)
        offs_m = pid_m * BM + 64 * WG + gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
        offs_n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
        y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        gl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)

    @gluon.jit
    def _consumer0(a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                   NSTEP, stride_ym, pid_m, pid_n):
        _consumer(a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                  NSTEP, stride_ym, pid_m, pid_n, 0)

    @gluon.jit
    def _consumer1(a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                   NSTEP, stride_ym, pid_m, pid_n):
        _consumer(a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                  NSTEP, stride_ym, pid_m, pid_n, 1)

    @gluon.jit
    def _mxfp8_wgmma_kernel(a_desc, b_desc, sa_desc, sb_desc, ua_ptr, ub_ptr, y_ptr, M, N,
                            NSTEP, stride_ym, BM: gl.constexpr, BN: gl.constexpr,
                            BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                            CONSUMER_REGS: gl.constexpr):
        """y = A Bᵀ; ``sa_desc``/``sb_desc``: TMA descriptors of the K-step-major fp32 scales
        ``[4·NSTEP, rows padded]`` (zeros past K and the rows); ``ua``/``ub`` the
        one-exponent flags per (64-row block of A / 128-row block of B, K step): each consumer
        warpgroup decides for its own 64 rows. Three partitions: two consumer warpgroups (64
        rows each) and a loader warp."""
        pid = gl.program_id(0)
        grid_m = gl.cdiv(M, BM)
        width = GROUP_M * gl.cdiv(N, BN)
        first = (pid // width) * GROUP_M
        rows_in_group = gl.minimum(grid_m - first, GROUP_M)
        pid_m = first + (pid % width) % rows_in_group
        pid_n = (pid % width) // rows_in_group
        a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
        sa_smem = gl.allocate_shared_memory(gl.float32, [STAGES, 4, BM], sa_desc.layout)
        sb_smem = gl.allocate_shared_memory(gl.float32, [STAGES, 4, BN], sb_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)
        common = (a_smem, b_smem, sa_smem, sb_smem, ready, empty, ua_ptr, ub_ptr, y_ptr, M, N,
                  NSTEP, stride_ym, pid_m, pid_n)
        loader = (a_desc, b_desc, sa_desc, sb_desc, a_smem, b_smem, sa_smem, sb_smem, ready,
                  empty, pid_m * BM, pid_n * BN, NSTEP)
        gl.warp_specialize([(_consumer0, common), (_consumer1, common), (_loader, loader)],
                           [4, 1], [CONSUMER_REGS, 24])


def _descriptor(codes: torch.Tensor, rows_block: int) -> "TensorDescriptor":
    dtype = gl.float8e5 if codes.dtype == torch.float8_e5m2 else gl.float8e4nv
    layout = gl.NVMMASharedLayout.get_default_for([rows_block, BK], dtype)
    return TensorDescriptor.from_tensor(codes, [rows_block, BK], layout)


def _scale_descriptor(scales: torch.Tensor, rows_block: int) -> "TensorDescriptor":
    """``[4, rows_block]`` boxes of the K-step-major fp32 scales, unswizzled."""
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)
    return TensorDescriptor.from_tensor(scales, [4, rows_block], layout)


def scaled_mm_mxfp8_wgmma(qa: QuantizedTensor, qb: QuantizedTensor,
                          out_dtype: torch.dtype = torch.float32,
                          group_m: int = 8) -> torch.Tensor:
    """MXFP8 × MXFP8 ``A @ Bᵀ`` ``[rows_a, rows_b]`` on Hopper's FP8 tensor cores (E4M3/E5M2,
    any pairing; same contract as ``gemm.scaled_mm_reference``): both operands through
    ``prepare_mx_wgmma`` (one memory-bound pass each), then :func:`launch`."""
    from .gemm_mxfp8_prepare import check_operand, prepare_mx_wgmma
    if not available(qa.data.device):
        raise KernelUnsupported("the Gluon MXFP8 kernel needs Hopper (9.x) and Triton's Gluon")
    if out_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise KernelUnsupported(f"out_dtype {out_dtype}")
    for q in (qa, qb):          # both before either is prepared
        check_operand(q)
    return launch(prepare_mx_wgmma(qa, BM // 2, BM), prepare_mx_wgmma(qb, BN, BN), out_dtype,
                  group_m)


def launch(prep_a: tuple, prep_b: tuple, out_dtype: torch.dtype = torch.float32,
           group_m: int = 8, stages: int = STAGES) -> torch.Tensor:
    """The GEMM alone on ``prepare_mx_wgmma``'s outputs (benchmarks time it apart)."""
    (qa, sa, ua), (qb, sb, ub) = prep_a, prep_b
    a, b = qa.data, qb.data
    if any(t.data_ptr() % 16 or t.stride(0) * t.element_size() % 16 for t in (a, b, sa, sb)):
        raise KernelUnsupported("TMA needs 16-byte aligned codes, scales and row strides")
    m, k = a.shape
    n = b.shape[0]
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    grid = (cdiv(m, BM) * cdiv(n, BN),)
    _mxfp8_wgmma_kernel[grid](_descriptor(a, BM), _descriptor(b, BN), _scale_descriptor(sa, BM),
                              _scale_descriptor(sb, BN), ua, ub, y, m, n, cdiv(k, BK),
                              y.stride(0), BM=BM, BN=BN, BK=BK, STAGES=stages, GROUP_M=group_m,
                              CONSUMER_REGS=CONSUMER_REGS, num_warps=4)
    return y
