"""The padded token layout of a grouped (MoE) tensor in one pass: the kernel twin of
:meth:`microscale.quant.grouped.GroupLayout.pad`.

``x [T, K]`` holds the tokens of E experts in order; the wgrad (column) layout ``x_pad
[bound, K]`` starts every expert's tokens at a multiple of m and fills the gaps with zero rows
(``quant/grouped.py``). The PyTorch twin writes a zero matrix, copies it and scatters x into
the copy (``new_zeros`` + out-of-place ``index_copy``: three passes over ``[bound, K]``, ~19 ms
of a 164 ms moe-1b fp8_blockwise step on an H100 in session 15's profile). Here every padded
row knows its source token (:func:`source_rows`: ``-1`` for a gap row) and one Triton pass
gathers it: x read once, ``x_pad`` written once, gap rows written as zeros. A copy, so the bits
are x's (tested against the twin, NaN and Inf included).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, _interpreting
from ._utils import cdiv

__all__ = ["pad_rows", "source_rows"]

CONFIG = {"BR": 16, "BC": 256, "num_warps": 4}


@triton.jit
def _pad_rows_kernel(x_ptr, src_ptr, y_ptr, bound, K, stride_x, stride_y, BR: tl.constexpr,
                     BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    rmask, cmask = rows < bound, cols < K
    src = tl.load(src_ptr + rows, mask=rmask, other=-1)
    take = (src >= 0)[:, None] & cmask[None, :]
    v = tl.load(x_ptr + tl.maximum(src, 0).to(tl.int64)[:, None] * stride_x + cols[None, :],
                mask=take, other=0)
    tl.store(y_ptr + rows.to(tl.int64)[:, None] * stride_y + cols[None, :], v,
             mask=rmask[:, None] & cmask[None, :])


def source_rows(lay, groups: torch.Tensor | None = None) -> torch.Tensor:
    """int32 ``[bound]``: the token row each padded row copies, ``-1`` for a zero (gap) row.
    ``groups``: ``lay.col_groups()``, when the caller has it already."""
    p = torch.arange(lay.bound, device=lay.offs.device)
    g = lay.col_groups() if groups is None else groups
    local = p - lay.pad_starts[g]
    return torch.where(local < lay.counts[g], lay.starts[g] + local,
                       torch.full_like(local, -1)).to(torch.int32)


def pad_rows(x: torch.Tensor, lay, groups: torch.Tensor | None = None) -> torch.Tensor:
    """``lay.pad(x)`` in one gathering pass (CUDA, or Triton's interpreter); ``groups`` as in
    :func:`source_rows`."""
    if not (x.device.type == "cuda" or _interpreting()):
        raise KernelUnsupported("the padding kernel needs CUDA tensors or TRITON_INTERPRET=1")
    if x.dim() != 2 or x.shape[0] != lay.tokens:
        raise ValueError(f"pad_rows: x must be [{lay.tokens}, K], got {tuple(x.shape)}")
    x = x.contiguous()
    y = torch.empty((lay.bound, x.shape[1]), dtype=x.dtype, device=x.device)
    cfg = CONFIG
    grid = (cdiv(lay.bound, cfg["BR"]), cdiv(x.shape[1], cfg["BC"]))
    _pad_rows_kernel[grid](x, source_rows(lay, groups), y, lay.bound, x.shape[1], x.stride(0),
                           y.stride(0), cfg["BR"], cfg["BC"], num_warps=cfg["num_warps"])
    return y
