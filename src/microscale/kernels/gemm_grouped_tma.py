"""The FP8 grouped GEMMs of ``gemm_grouped`` with their operands read through TMA descriptors.

Same math, same grid, same group walk and epilogue as the pointer kernels there (their module
docstring has the layouts and the scaling)::

    y[m, n] = Σ_kb  sa[m/br_a, kb] · sb[n_b/br_b, kb] · Σ_{k in chunk kb} a[m, k] · b[n_b, k]

What changes is how a tile of FP8 codes reaches shared memory. The pointer kernels load each
``[BM, 128]`` / ``[BN, 128]`` tile with masked vector loads: every thread computes a 64-bit
address and a mask per element, which on Hopper costs registers (the 128×128 FP8 tile with 8
warps spilled, session 15) and issue slots the FP8 tensor cores are waiting on (the kernel ran
at ~550 TFLOP/s at DeepSeek-V3 expert shapes, below the bf16 grouped kernel's 580, against
~990 for the core FP8 rowwise grouped GEMM). A TMA descriptor has the copy engine fetch the
whole tile from a two-number coordinate, out-of-range rows and columns as zeros.

**Why unmasked tiles are still exact.** A "tokens" tile starts at its group's row (``row0``)
and may run past the group's end into the next group's rows, and its ``b`` tile may run past
the expert's ``N`` rows into the next expert's. Row ``m`` of ``a · bᵀ`` depends on row ``m`` of
``a`` only and column ``n`` on row ``n`` of ``b`` only, so those foreign rows and columns only
produce results that the store masks off (they may be NaN: nothing reads them). Their block
scales load as 0 like the pointer kernels'. "reduce" groups end at multiples of 128 (the FP8
contract, ``k_align``), so a 128-wide K step never crosses a group end.

Needs 16-byte aligned operand rows (K a multiple of 16 and the data 16-byte aligned); the
caller keeps the pointer kernels otherwise. Triton's interpreter runs these kernels too (its
descriptors zero-fill like the hardware's), which is how CI checks them bit-for-bit against the
pointer kernels.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .gemm_fp8 import _interpreter_f32
from .gemm_grouped import add_scaled_chunk, tokens_epilogue
from .gemm_grouped_tiles import reduce_tile, tokens_tile

__all__ = ["tma_ok", "launch_tokens", "launch_reduce"]


@triton.jit
def _codes(desc, r, c, E5M2: tl.constexpr, DOT_F32: tl.constexpr):
    """One tile of FP8 codes (loaded as bytes, bit-cast; fp32 in the interpreter)."""
    raw = desc.load([r, c])
    t = raw.to(tl.float8e5 if E5M2 else tl.float8e4nv, bitcast=True)
    if DOT_F32:
        t = _interpreter_f32(t, raw, E5M2)
    return t


@triton.jit
def _tokens_tma_kernel(a_desc, b_desc, y_ptr, sa_ptr, sb_ptr, offs_ptr, f_ptr, R, N, K, E,
                       stride_y, stride_sa, stride_sb, BR_A: tl.constexpr, BR_B: tl.constexpr,
                       A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
                       BN: tl.constexpr, BK: tl.constexpr, B_TILE_SCALE: tl.constexpr,
                       DOT_F32: tl.constexpr, HAS_F: tl.constexpr):
    group, row0, col0, offs_m, mmask, offs_n, nmask, expert, live = tokens_tile(
        tl.program_id(0), offs_ptr, R, N, E, BM, BN)
    b_row0 = expert * N + col0
    b_rows = b_row0 + tl.arange(0, BN)
    k_hi = tl.where(live, K, 0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k_hi, BK):
        a = _codes(a_desc, row0, k0, A_E5M2, DOT_F32)
        b = _codes(b_desc, b_row0, k0, B_E5M2, DOT_F32)
        acc = add_scaled_chunk(acc, tl.dot(a, tl.trans(b)), sa_ptr, sb_ptr, offs_m, mmask,
                               b_rows, nmask, k0 // BK, stride_sa, stride_sb, BR_A, BR_B,
                               B_TILE_SCALE)
    tokens_epilogue(acc, y_ptr, f_ptr, group, E, offs_m, mmask, offs_n, nmask, stride_y,
                    HAS_F, DOT_F32)


@triton.jit
def _reduce_tma_kernel(a_desc, b_desc, y_ptr, sa_ptr, sb_ptr, offs_ptr, M, N, stride_y,
                       stride_sa, stride_sb, BR_A: tl.constexpr, BR_B: tl.constexpr,
                       A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
                       BN: tl.constexpr, BK: tl.constexpr, DOT_F32: tl.constexpr):
    e, k_lo, k_hi, row0, col0, offs_m, mmask, offs_n, nmask = reduce_tile(
        tl.program_id(0), offs_ptr, M, N, BM, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        a = _codes(a_desc, row0, k0, A_E5M2, DOT_F32)
        b = _codes(b_desc, col0, k0, B_E5M2, DOT_F32)
        acc = add_scaled_chunk(acc, tl.dot(a, tl.trans(b)), sa_ptr, sb_ptr, offs_m, mmask,
                               offs_n, nmask, k0 // BK, stride_sa, stride_sb, BR_A, BR_B, False)
    tl.store(y_ptr + e.to(tl.int64) * M * N + offs_m[:, None] * stride_y + offs_n[None, :], acc,
             mask=mmask[:, None] & nmask[None, :])


# --------------------------------------------------------------------------- host side
def tma_ok(*ts: torch.Tensor) -> bool:
    """A device with TMA (sm_90+; the interpreter emulates it), a Triton with host
    descriptors, and TMA's alignment rules for 2-D byte operands: contiguous rows, 16-byte
    aligned data and row stride."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    dev = ts[0].device
    if dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] < 9:
        return False
    return all(t.dim() == 2 and t.stride(1) == 1 and t.stride(0) % 16 == 0
               and t.data_ptr() % 16 == 0 for t in ts)


def _descs(a: torch.Tensor, b: torch.Tensor, bm: int, bn: int, bk: int):
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk])


def launch_tokens(a, b, y, sa, sb, offs, f, R, N, K, E, flags: dict, tiles: dict, grid,
                  tile_scale: bool, has_f: bool) -> None:
    """``_tokens_tma_kernel`` on byte views ``a [R, K]``, ``b [E·N, K]`` (``gemm_grouped``
    has validated the call and built ``flags`` / ``tiles``)."""
    a_desc, b_desc = _descs(a, b, tiles["BM"], tiles["BN"], tiles["BK"])
    fl = {k: v for k, v in flags.items() if k != "FP8"}
    _tokens_tma_kernel[grid](a_desc, b_desc, y, sa, sb, offs, f, R, N, K, E, y.stride(0),
                             sa.stride(0), sb.stride(0), **fl, B_TILE_SCALE=tile_scale,
                             HAS_F=has_f, **tiles)


def launch_reduce(a, b, y, sa, sb, offs, M, N, flags: dict, tiles: dict, grid) -> None:
    """``_reduce_tma_kernel`` on byte views ``a [M, Kb]``, ``b [N, Kb]``."""
    a_desc, b_desc = _descs(a, b, tiles["BM"], tiles["BN"], tiles["BK"])
    fl = {k: v for k, v in flags.items() if k != "FP8"}
    _reduce_tma_kernel[grid](a_desc, b_desc, y, sa, sb, offs, M, N, y.stride(1), sa.stride(0),
                             sb.stride(0), **fl, **tiles)
