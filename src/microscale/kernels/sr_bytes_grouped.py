"""Stochastic-rounding bytes of a grouped (MoE) view, made on the device in one pass.

Twin of :func:`microscale.quant.grouped.segment_sr_bytes` (bit-exact; tested in the
interpreter): byte ``(mix64(seed_e · G + i) >> 24) & 255`` for element ``i`` of expert e's own
tensor, where ``mix64`` is splitmix64's finalizer and ``G`` the 64-bit golden-ratio constant.
The PyTorch twin needs int64 temporaries the size of the view (eight bytes an element, several
passes); this kernel reads the expert ids and writes the one byte.

Segments run along the view's rows (a row view: expert e owns rows ``[start_e, start_e +
len_e)`` of a ``[rows, cols]`` view, element index ``(r - start_e) · cols + c``) or along its
columns (the padded column view: columns ``[start_e, start_e + len_e)``, index
``r · len_e + (c - start_e)``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._utils import cdiv

__all__ = ["segment_sr_bytes_triton"]

_GOLD = tl.constexpr(0x9E3779B97F4A7C15)
_M1 = tl.constexpr(0xBF58476D1CE4E5B9)
_M2 = tl.constexpr(0x94D049BB133111EB)


@triton.jit
def _sr_bytes_kernel(seg_ptr, starts_ptr, lengths_ptr, seeds_ptr, out_ptr, rows, cols,
                     ALONG_ROWS: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    offs_r = tl.program_id(0) * BR + tl.arange(0, BR)
    offs_c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
    r64, c64 = offs_r.to(tl.int64), offs_c.to(tl.int64)
    if ALONG_ROWS:
        g = tl.load(seg_ptr + offs_r, mask=offs_r < rows, other=0)
        local = (r64 - tl.load(starts_ptr + g))[:, None] * cols + c64[None, :]
        seed = tl.load(seeds_ptr + g)[:, None]
    else:
        g = tl.load(seg_ptr + offs_c, mask=offs_c < cols, other=0)
        length = tl.load(lengths_ptr + g)
        local = r64[:, None] * length[None, :] + (c64 - tl.load(starts_ptr + g))[None, :]
        seed = tl.load(seeds_ptr + g)[None, :]
    h = seed.to(tl.uint64) * _GOLD + local.to(tl.uint64)
    h = h ^ (h >> 30)
    h = h * _M1
    h = h ^ (h >> 27)
    h = h * _M2
    h = h ^ (h >> 31)
    byte = ((h >> 24) & 255).to(tl.uint8)
    tl.store(out_ptr + r64[:, None] * cols + c64[None, :], byte, mask=mask)


def segment_sr_bytes_triton(seg, starts, lengths, shape: tuple, along: str,
                            seeds: torch.Tensor) -> torch.Tensor:
    """uint8 ``shape`` bytes, as ``quant.grouped.segment_sr_bytes`` (same arguments)."""
    rows, cols = shape
    out = torch.empty((rows, cols), dtype=torch.uint8, device=seg.device)
    br, bc = 32, 128
    grid = (cdiv(rows, br), cdiv(cols, bc))
    _sr_bytes_kernel[grid](seg.to(torch.int32).contiguous(), starts.to(torch.int64).contiguous(),
                           lengths.to(torch.int64).contiguous(),
                           seeds.reshape(-1).to(torch.int64).contiguous(), out, rows, cols,
                           along == "rows", br, bc)
    return out
