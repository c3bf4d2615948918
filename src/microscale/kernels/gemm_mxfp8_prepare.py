"""The memory-bound pass in front of the MXFP8 FP8-tensor-core GEMMs (``gemm_mxfp8``, ``tl``;
``gemm_mxfp8_wgmma``, Gluon): regroup, decode the scales, flag the one-exponent K steps.

An MXFP8 operand is codes ``[rows, K]`` (fp8, K contiguous) and UE8M0 scale bytes
``[rows, K/32]``. Before a GEMM consumes it, one pass over each operand

* **regroups** it (``quant/mx_regroup.py``, bit-exact Triton twin): the same values rewritten
  with one exponent per (row, group of 32·CH) wherever shifting the smaller blocks' codes
  down loses no bit, so that most K steps of a GEMM tile are one MMA chain;
* writes the scales as **fp32 bit patterns** (exactly ``formats.e8m0_decode``: byte 0 is the
  subnormal 2^-127, 0xFF NaN), so that the GEMM multiplies instead of decoding bytes: row-major
  ``[rows, K/32]`` for the ``tl`` kernel, K-step-major ``[K/32 → 4·steps, rows padded]``
  with zeros in the padding for the Gluon kernel's TMA boxes (:func:`prepare_mx_wgmma`);
* for the Gluon kernel, **flags** each (block of ``block_rows`` rows, K step of 128): 1 where
  every row of the block has one exponent over the step's chunks inside K, the kernel's test
  for taking one MMA chain instead of four.

Everything here runs in Triton's interpreter and is tested bit-exact against the references.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported
from ..quant.mx_regroup import MANTISSA_BITS
from ..tensor import QuantizedTensor
from ._utils import cdiv

__all__ = ["check_operand", "prepare_mx", "prepare_mx_wgmma", "regroup_mx"]


@triton.jit
def _e8m0_bits(e):
    """UE8M0 bytes (int32) to the fp32 bit pattern of ``2^(e-127)``: exponent field e; byte 0
    is the subnormal 2^-127 (0x00400000), byte 255 a quiet NaN (0x7FC00000)."""
    bits = e << 23
    bits = tl.where(e == 0, 0x00400000, bits)
    return tl.where(e == 255, 0x7FC00000, bits)


@triton.jit
def _prepare_kernel(x_ptr, s_ptr, y_ptr, t_ptr, f_ptr, u_ptr, R, K, KS, stride_xr, stride_sr,
                    stride_fr, stride_fk, MB: tl.constexpr, BR: tl.constexpr, CH: tl.constexpr,
                    REGROUP: tl.constexpr, UNIFORM: tl.constexpr = False):
    """One (row block, group of CH·32 elements): with REGROUP, ``quant/mx_regroup.py`` on the
    bytes (codes to y, scale bytes to t); always the fp32 scale bits of the result to f (at
    strides ``(stride_fr, stride_fk)``: row-major or K-step-major). With UNIFORM, also one int32
    to ``u[row block, group]``: 1 if every row of the block has one exponent over the group's
    chunks inside K (the wgmma kernel's one-chain test, ``gemm_mxfp8_wgmma``)."""
    offs_r = tl.program_id(0) * BR + tl.arange(0, BR)
    kb0 = tl.program_id(1) * CH
    rmask = offs_r < R
    cols = tl.arange(0, CH)
    smask = rmask[:, None] & ((kb0 + cols) < KS)[None, :]
    e = tl.load(s_ptr + offs_r[:, None] * stride_sr + kb0 + cols[None, :], mask=smask,
                other=0).to(tl.int32)
    if REGROUP:
        e_max = tl.max(e, axis=1)
        offs_k = kb0 * 32 + tl.arange(0, 32 * CH)
        xmask = rmask[:, None] & (offs_k < K)[None, :]
        x_ptrs = offs_r[:, None] * stride_xr + offs_k[None, :]
        c = tl.load(x_ptr + x_ptrs, mask=xmask, other=0).to(tl.int32)
        e_el = tl.reshape(tl.broadcast_to(e[:, :, None], (BR, CH, 32)), (BR, 32 * CH))
        d = e_max[:, None] - e_el
        sign, mag = c & 0x80, c & 0x7F
        f, m = mag >> MB, mag & ((1 << MB) - 1)
        normal = f > d
        sig = tl.where(f > 0, m | (1 << MB), m)
        sh = tl.minimum(tl.maximum(tl.where(f > 0, d - f + 1, d), 0), 15)
        lost = sig & ((1 << sh) - 1)
        shifted = tl.where(normal, c - (d << MB), sign | (sig >> sh))
        special = (mag == 0x7F) if MB == 3 else ((mag >> 2) == 0x1F)
        exact = (normal | (lost == 0)) & ((d == 0) | (special == 0))
        ok = (tl.min(exact.to(tl.int32), axis=1) == 1) & \
            (tl.max((e == 255).to(tl.int32), axis=1) == 0)
        tl.store(y_ptr + x_ptrs, tl.where(ok[:, None] & (d != 0), shifted, c).to(tl.uint8),
                 mask=xmask)
        e = tl.where(ok[:, None], e_max[:, None] + 0 * e, e)
        tl.store(t_ptr + offs_r[:, None] * stride_sr + kb0 + cols[None, :], e.to(tl.uint8),
                 mask=smask)
    tl.store(f_ptr + offs_r[:, None] * stride_fr + (kb0 + cols[None, :]) * stride_fk,
             _e8m0_bits(e), mask=smask)
    if UNIFORM:
        first = tl.sum(tl.where(cols[None, :] == 0, e, 0), axis=1)
        same = tl.where(smask, e == first[:, None], True).to(tl.int32)
        tl.store(u_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1),
                 tl.min(tl.min(same, axis=1), axis=0))


def check_operand(q: QuantizedTensor) -> None:
    if q.fmt not in MANTISSA_BITS:
        raise KernelUnsupported(f"{q.fmt.value} is not MXFP8")
    if q.block != (1, 32) or q.cols % 32:
        raise KernelUnsupported(f"{q.fmt.value} with block {q.block} and K={q.cols}")
    if q.data.stride(-1) != 1 or q.scale.stride(-1) != 1:
        raise KernelUnsupported("codes and scales must be contiguous along K")


def prepare_mx(q: QuantizedTensor, group: int = 128, regroup: bool = True,
               block_rows: int = 32) -> tuple[QuantizedTensor, torch.Tensor]:
    """``(q regrouped or as is, its scales as fp32 bit patterns int32 [rows, K/32])``.

    One memory-bound pass: the GEMM then loads each flush's scales as fp32 (one load per
    row/column instead of a load and ~5 integer ops to decode the byte). With ``regroup``, the
    Triton twin of ``quant.mx_regroup.regroup_mx_reference`` (bit-exact; a last partial group
    is regrouped over the chunks it has).
    """
    check_operand(q)
    ch = group // 32
    if group % 32 or ch & (ch - 1):
        raise KernelUnsupported(f"regroup: group {group} must be 32 times a power of two")
    x = q.data.view(torch.uint8)
    rows, k = x.shape
    y, t = (torch.empty_like(x), torch.empty_like(q.scale)) if regroup else (x, q.scale)
    f = torch.empty(q.scale.shape, dtype=torch.int32, device=x.device)
    grid = (cdiv(rows, block_rows), cdiv(k, group))
    _prepare_kernel[grid](x, q.scale, y, t, f, f, rows, k, q.scale.shape[1], x.stride(0),
                          q.scale.stride(0), f.stride(0), 1, MB=MANTISSA_BITS[q.fmt],
                          BR=block_rows, CH=ch, REGROUP=regroup, num_warps=4)
    return (replace(q, data=y.view(q.data.dtype), scale=t) if regroup else q), f


def prepare_mx_wgmma(q: QuantizedTensor, block_rows: int, pad_rows: int = 128
                     ) -> tuple[QuantizedTensor, torch.Tensor, torch.Tensor]:
    """What ``gemm_mxfp8_wgmma`` consumes, in the same one pass as :func:`prepare_mx`: ``(q
    regrouped per 128, its fp32 scales K-step-major, int32 flags)``. The scales are
    ``[4·steps, rows]`` with rows rounded up to ``pad_rows`` and zeros past K and past the
    rows, so that the GEMM's TMA boxes never leave the array and padding scales nothing. The
    flags are ``[row blocks (of block_rows, padded alike), K steps]``, 1 where every row of the
    block has one exponent over the step (padding blocks: 1)."""
    check_operand(q)
    x = q.data.view(torch.uint8)
    rows, k = x.shape
    y, t = torch.empty_like(x), torch.empty_like(q.scale)
    grid = (cdiv(rows, block_rows), cdiv(k, 128))
    padded = cdiv(rows, pad_rows) * pad_rows
    f = torch.zeros((4 * grid[1], padded), dtype=torch.int32, device=x.device)
    u = torch.ones((cdiv(padded, block_rows), grid[1]), dtype=torch.int32, device=x.device)
    _prepare_kernel[grid](x, q.scale, y, t, f, u, rows, k, q.scale.shape[1], x.stride(0),
                          q.scale.stride(0), 1, f.stride(0), MB=MANTISSA_BITS[q.fmt],
                          BR=block_rows, CH=4, REGROUP=True, UNIFORM=True, num_warps=8)
    return replace(q, data=y.view(q.data.dtype), scale=t), f.view(torch.float32), u


def regroup_mx(q: QuantizedTensor, group: int = 128) -> QuantizedTensor:
    """The regrouped tensor alone (see :func:`prepare_mx`)."""
    return prepare_mx(q, group, regroup=True)[0]
