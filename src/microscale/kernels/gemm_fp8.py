"""FP8 GEMMs on Hopper's FP8 tensor cores: blockwise (DeepSeek-V3) and tensorwise scaling.

``y = A Bᵀ`` for A ``[M, K]`` and B ``[N, K]``, both E4M3/E5M2 codes along K::

    y[m, n] = Σ_kb  sa[m/bra, kb] · sb[n/brb, kb] · Σ_{k in block kb} a[m, k] · b[n, k]

with ``kb`` the 128-wide K block and ``bra``/``brb`` the row extent of one scale (1 for
1×128 activations and gradients, 128 for 128×128 weights). Tensorwise is the single-block
case. The inner sums run on FP8 tensor cores with fp32 accumulation; each block's partial
sum is scaled before it joins the total, which is why a blockwise kernel cannot simply fold
the scales into the epilogue.

Three paths, fastest first; each falls through to the next when it cannot take the call
(a blockwise product goes to DeepGEMM first where it is installed and, timed per shape, the
faster: ``gemm_deepgemm``):

1. ``torch.nn.functional.scaled_mm`` (torch >= 2.10, feature-detected) with
   ``ScalingType.BlockWise1x128`` / ``BlockWise128x128``: cuBLASLt's blockwise FP8 GEMM
   (sm_90, cuBLAS >= 12.9). Its scale layouts differ from ours (fp32 ``scale_inv`` row-major
   ``[rows/br, K/128]``): a 1×128 scale must be *column-major* ``[rows, K/128]`` (strides
   ``(1, rows)``); a 128×128 scale of B must be the transpose of a row-major
   ``[N/128, round_up(K/128, 4)]`` buffer (torch versions differ on the padding, so both
   layouts are tried once and the one accepted is cached). mat_b is ``B.t()`` (column-major).
2. ``torch._scaled_mm`` for tensorwise scaling (one fp32 ``scale_inv`` per operand).
3. A Triton kernel (``tl.dot`` on fp8 operands, per-block scales applied to each 128-wide
   partial product in the main loop), for anything the first two refuse, e.g. E5M2 × E5M2,
   and where ``gemm_paths``' table asks for it (a tile config, and ``split_k``: the K blocks
   split over that many programs per output tile, fp32 partials summed in a fixed order, for
   weight gradients whose few output tiles leave most SMs idle).

Measured on an H200 with torch 2.11 (``benchmarks/results/gemm_notes.md``): the first layout
(column-major 1×128, padded-transpose 128×128) is accepted; 1×128 × 128×128 runs at
~1120-1160 TF/s (1.45-1.67x bf16), cuBLAS refuses fast accumulation with 128×128 scaling;
tensorwise ~1210-1290 TF/s; the Triton fallback ~450 TF/s blockwise.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..backend import (KernelUnsupported, _interpreting, mm_key, note_fallback, note_path,
                       register_kernel)
from ..tensor import QFormat, QuantizedTensor
from . import gemm_deepgemm
from ._utils import cdiv, gemm_out, grouped_tile
from .gemm_paths import choose_path

__all__ = ["scaled_mm_fp8", "has_blockwise_scaled_mm", "blockwise_call_args", "PATHS"]

log = logging.getLogger(__name__)
PATHS = ("auto", "torch", "triton")
_KBLOCK = 128


# ----------------------------------------------------------------------------- Triton fallback
@triton.jit
def _interpreter_f32(v, raw, E5M2: tl.constexpr):
    """fp8 ``v`` (raw bytes ``raw``) as fp32 in Triton's CPU interpreter, whose fp8 conversion
    reads the NaN/Inf codes as numbers (E4M3 0x7F as 480); the GPU path never takes this."""
    f = v.to(tl.float32)
    mag = raw & 0x7F
    if E5M2:
        f = tl.where(mag == 0x7C, tl.where(raw > 0x7F, float("-inf"), float("inf")), f)
        f = tl.where(mag > 0x7C, float("nan"), f)
    else:
        f = tl.where(mag == 0x7F, float("nan"), f)
    return f


@triton.jit
def _fp8_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, y_ptr, M, N, K,
                       stride_am, stride_bn, stride_ym,
                       stride_sam, stride_sak, stride_sbn, stride_sbk,
                       BR_A: tl.constexpr, BR_B: tl.constexpr, A_E5M2: tl.constexpr,
                       B_E5M2: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                       GROUP_M: tl.constexpr, DOT_F32: tl.constexpr,
                       SPLIT_K: tl.constexpr = 1, stride_ys=0):
    """Blockwise-scaled FP8 GEMM; the K step is one 128-wide scale block. ``SPLIT_K`` > 1:
    program (tile, s) sums the s-th run of ``cdiv(K/128, SPLIT_K)`` K blocks into
    ``y[s]`` (fp32 partials ``stride_ys`` apart; the caller adds them)."""
    BK: tl.constexpr = 128
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    k_lo, k_hi = 0, K
    if SPLIT_K > 1:                  # (SPLIT_K 1: the loop as before, its code unchanged)
        per = tl.cdiv(tl.cdiv(K, BK), SPLIT_K) * BK
        k_lo = tl.program_id(1) * per
        k_hi = tl.minimum(k_lo + per, K)
        y_ptr += tl.program_id(1) * stride_ys
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mmask, nmask = offs_m < M, offs_n < N
    sa_rows = sa_ptr + (offs_m // BR_A) * stride_sam     # scale row of each output row
    sb_rows = sb_ptr + (offs_n // BR_B) * stride_sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        offs_k = k0 + tl.arange(0, BK)
        kmask = offs_k < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :],
                    mask=mmask[:, None] & kmask[None, :], other=0)
        b = tl.load(b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :],
                    mask=nmask[:, None] & kmask[None, :], other=0)
        a_raw, b_raw = a, b
        a = a.to(tl.float8e5 if A_E5M2 else tl.float8e4nv, bitcast=True)
        b = b.to(tl.float8e5 if B_E5M2 else tl.float8e4nv, bitcast=True)
        if DOT_F32:   # the CPU interpreter: the same products in fp32 (fp8 values are exact)
            a, b = _interpreter_f32(a, a_raw, A_E5M2), _interpreter_f32(b, b_raw, B_E5M2)
        part = tl.dot(a, tl.trans(b))                     # fp32 sum over one K block
        kb = k0 // BK
        sa = tl.load(sa_rows + kb * stride_sak, mask=mmask, other=0.0)
        sb = tl.load(sb_rows + kb * stride_sbk, mask=nmask, other=0.0)
        acc += part * sa[:, None] * sb[None, :]
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


def _scale_view(q: QuantizedTensor) -> tuple[torch.Tensor, int, int, int]:
    """``(fp32 scale_inv, rows per scale, row stride, K-block stride)`` for the kernel."""
    if q.fmt == QFormat.FP8_TENSOR:
        s = q.scale.float().reshape(1)
        return s, 1, 0, 0
    s = q.scale.float()
    return s, q.block[0], s.stride(0), s.stride(1)


def _triton_fp8(qa, qb, out_dtype, bm=128, bn=128, group_m=8, num_warps=8, num_stages=3,
                split_k=1):
    """The Triton kernel; ``split_k`` > 1 splits the K blocks over that many programs per
    output tile (for weight gradients with few output tiles and K = tokens), each writing an
    fp32 partial, summed afterwards in a fixed order (deterministic; SPEC: exact up to the
    summation order)."""
    a, b = qa.data, qb.data
    if a.stride(-1) != 1 or b.stride(-1) != 1:
        raise KernelUnsupported("fp8 codes must be contiguous along K")
    if not (isinstance(split_k, int) and split_k >= 1):
        raise ValueError(f"split_k must be a positive int, got {split_k!r}")
    m, k = a.shape
    n = b.shape[0]
    sa, br_a, ssam, ssak = _scale_view(qa)
    sb, br_b, ssbn, ssbk = _scale_view(qb)
    y = torch.empty((split_k, m, n) if split_k > 1 else (m, n),
                    dtype=torch.float32 if split_k > 1 else out_dtype, device=a.device)
    grid = (cdiv(m, bm) * cdiv(n, bn), split_k)
    _fp8_scaled_kernel[grid](a.view(torch.uint8), sa, b.view(torch.uint8), sb, y, m, n, k,
                             a.stride(0), b.stride(0), y.stride(-2), ssam, ssak, ssbn, ssbk,
                             BR_A=br_a, BR_B=br_b, A_E5M2=a.dtype == torch.float8_e5m2,
                             B_E5M2=b.dtype == torch.float8_e5m2, BM=bm, BN=bn,
                             GROUP_M=group_m, DOT_F32=_interpreting(), SPLIT_K=split_k,
                             stride_ys=y.stride(0) if split_k > 1 else 0,
                             num_warps=num_warps, num_stages=num_stages)
    return y if split_k == 1 else y.sum(0).to(out_dtype)


# ----------------------------------------------------------------------------- torch paths
def has_blockwise_scaled_mm() -> bool:
    """True when this torch exposes ``F.scaled_mm`` with the DeepSeek-style scaling types."""
    st = getattr(F, "ScalingType", None)
    return (hasattr(F, "scaled_mm") and st is not None
            and hasattr(st, "BlockWise1x128") and hasattr(st, "BlockWise128x128"))


def _col_major(s: torch.Tensor) -> torch.Tensor:
    return s.t().contiguous().t()


def _pad_kblocks_t(s: torch.Tensor) -> torch.Tensor:
    """``[rows/128, K/128]`` -> the transpose of a zero-padded ``[rows/128, round_up(K/128, 4)]``."""
    kb = s.shape[1]
    if kb % 4 == 0:
        return s.t()                       # already that layout: no copy
    padded = s.new_zeros((s.shape[0], -(-kb // 4) * 4))
    padded[:, :kb] = s
    return padded.t()


# The scale layouts torch versions accept, most recent rule first (builders, so that only the
# cached one runs per call). A is mat_a = A [M, K]; B is mat_b = Bᵀ [K, N] (column-major).
_LAYOUTS_1x128 = {"a": (_col_major,),
                  "b": (_col_major, lambda s: s.t().contiguous())}       # older: scale_b.t()
_LAYOUTS_128x128 = {"a": (_pad_kblocks_t, lambda s: s.t(), lambda s: s),  # older: row-major
                    "b": (_pad_kblocks_t, lambda s: s.t())}

_PLAN: dict[tuple, tuple[int, int, torch.dtype]] = {}
_TORCH_ERRORS = (RuntimeError, ValueError, NotImplementedError, TypeError)
USE_FAST_ACCUM = False   # Hopper's FP8 "fast accumulation" skips periodic fp32 promotion


def _layouts(q: QuantizedTensor, side: str):
    return (_LAYOUTS_1x128 if q.block[0] == 1 else _LAYOUTS_128x128)[side]


def _scaling_type(q: QuantizedTensor):
    st = F.ScalingType
    return st.BlockWise1x128 if q.block[0] == 1 else st.BlockWise128x128


def blockwise_call_args(qa: QuantizedTensor, qb: QuantizedTensor, plan: tuple) -> tuple:
    """The positional arguments of ``F.scaled_mm`` for ``plan = (layout_a, layout_b, dtype)``."""
    i, j, _ = plan
    sa, sb = qa.scale.float(), qb.scale.float()
    return (qa.data, qb.data.t(), _layouts(qa, "a")[i](sa), _scaling_type(qa),
            _layouts(qb, "b")[j](sb), _scaling_type(qb))


def _torch_blockwise(qa, qb, out_dtype) -> torch.Tensor:
    """cuBLASLt blockwise FP8 through ``F.scaled_mm``; tries layouts once, then caches the plan."""
    if not has_blockwise_scaled_mm():
        raise KernelUnsupported("this torch has no F.scaled_mm with blockwise scaling")
    key = (qa.block, qb.block, out_dtype, qa.device)
    plans = [_PLAN[key]] if key in _PLAN else [
        (i, j, od) for od in dict.fromkeys((out_dtype, torch.bfloat16))
        for i in range(len(_layouts(qa, "a"))) for j in range(len(_layouts(qb, "b")))]
    for plan in plans:
        try:
            y = F.scaled_mm(*blockwise_call_args(qa, qb, plan), output_dtype=plan[2],
                            use_fast_accum=USE_FAST_ACCUM)
        except _TORCH_ERRORS as err:
            log.debug("F.scaled_mm refused layout %s: %s", plan, err)
            continue
        _PLAN[key] = plan
        path, op_key = "F.scaled_mm blockwise (cuBLASLt)", mm_key(qa.fmt.value, qb.fmt.value)
        if plan[2] != out_dtype:          # never silently: the sum is rounded to bf16 first
            note_fallback("scaled_mm", op_key, f"{path}, bf16 output cast to {out_dtype}",
                          f"this torch build's F.scaled_mm refused {out_dtype} output with "
                          "blockwise scales")
        else:
            note_path("scaled_mm", op_key, path)
        return y.to(out_dtype)
    raise KernelUnsupported("F.scaled_mm refused every blockwise scale layout")


def _torch_tensorwise(qa, qb, out_dtype) -> torch.Tensor:
    if not hasattr(torch, "_scaled_mm"):
        raise KernelUnsupported("this torch has no torch._scaled_mm")
    sa, sb = qa.scale.float().reshape(()), qb.scale.float().reshape(())
    try:
        return torch._scaled_mm(qa.data, qb.data.t(), scale_a=sa, scale_b=sb,
                                out_dtype=out_dtype)
    except _TORCH_ERRORS as err:             # e.g. E5M2 x E5M2, or dims not multiples of 16
        raise KernelUnsupported(f"torch._scaled_mm: {err}") from None


def _deepgemm(qa, qb, out_dtype) -> torch.Tensor | None:
    """DeepGEMM's blockwise kernel where it is installed, takes the call and is the faster for
    this shape (:mod:`.gemm_deepgemm`); None: cuBLASLt runs it (an error from DeepGEMM is a
    noted fallback)."""
    if gemm_deepgemm.refuses(qa, qb, out_dtype) is not None:
        return None
    kind = gemm_deepgemm.kind_of(qa, qb)
    key = gemm_deepgemm.PATH_KEYS[kind]
    try:
        use, why = gemm_deepgemm.prefers(qa, qb, lambda: _torch_blockwise(qa, qb, out_dtype))
        if not use:
            return None
        y = gemm_deepgemm.scaled_mm_deepgemm(qa, qb)
    except RuntimeError as err:               # DeepGEMM's host checks raise RuntimeError
        gemm_deepgemm.turn_off(kind, str(err))
        note_fallback("scaled_mm", key, "F.scaled_mm blockwise (cuBLASLt)",
                      f"DeepGEMM refused: {err}"[:300])
        return None
    note_path("scaled_mm", key, f"DeepGEMM fp8_gemm_nt {kind} (sm_90, JIT-compiled; {why})")
    return y


def scaled_mm_fp8(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype = torch.float32,
                  path: str = "auto", **tile) -> torch.Tensor:
    """FP8 blockwise/tensorwise ``A @ Bᵀ`` (same contract as ``gemm.scaled_mm_reference``)."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    fp8 = (QFormat.FP8_BLOCK, QFormat.FP8_TENSOR)
    if qa.fmt not in fp8 or qb.fmt not in fp8:
        raise KernelUnsupported(f"{qa.fmt.value} x {qb.fmt.value} is not FP8 x FP8")
    if out_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise KernelUnsupported(f"out_dtype {out_dtype}")
    y, why = None, "path='triton'"
    key = mm_key(qa.fmt.value, qb.fmt.value)
    if path == "auto":                  # the per-shape table may prefer the Triton kernel
        chosen, tile_cfg, rule = choose_path("fp8", qa.rows, qb.rows, qa.cols)
        if chosen == "triton":
            path, why, tile = "triton", f"gemm_paths {rule}", {**tile_cfg, **tile}
    if path != "triton" and qa.device.type == "cuda" and qa.fmt == qb.fmt:
        blockwise = qa.fmt == QFormat.FP8_BLOCK
        if blockwise and path == "auto" and (y := _deepgemm(qa, qb, out_dtype)) is not None:
            return gemm_out(y, qa, qb)
        torch_fn = _torch_blockwise if blockwise else _torch_tensorwise
        try:
            y = torch_fn(qa, qb, out_dtype)       # the blockwise path records its own path
            if not blockwise:
                note_path("scaled_mm", key, "torch._scaled_mm tensorwise (cuBLASLt)")
        except KernelUnsupported as err:
            if path == "torch":
                raise
            why = str(err)
            log.debug("FP8 GEMM falls back to Triton: %s", err)
    if y is None:
        if path == "torch":
            raise KernelUnsupported("the torch FP8 path needs CUDA tensors of one format")
        y = _triton_fp8(qa, qb, out_dtype, **tile)
        note_path("scaled_mm", key, f"triton FP8 kernel ({why})")
    return gemm_out(y, qa, qb)


def _register() -> None:
    for key in ("fp8_blockxfp8_block", "fp8_tensorxfp8_tensor"):
        register_kernel("scaled_mm", key)(
            lambda qa, qb, out_dtype=torch.float32, apply_factor=True:   # FP8: f = 1
            scaled_mm_fp8(qa, qb, out_dtype))


_register()
