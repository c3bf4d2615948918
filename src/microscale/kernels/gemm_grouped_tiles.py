"""Which tile a program of a grouped (MoE) GEMM owns, from the group ends on the device.

**Schedule without the group sizes on the host.** The launch grid depends on shapes only.
"tokens": ``cdiv(R, BM) + E + 1`` row tiles × ``cdiv(N, BN)`` column tiles; a program walks the
ends in order, counting each group's ``cdiv(size, BM)`` row tiles (then the tail past
``offs[-1]``, which it fills with zeros), and finds the group and the row offset of its tile;
programs past the last tile have nothing to do (their K loop is empty and their store masked
off). Column tiles vary fastest, so the programs in flight share a few row tiles of ``a`` and one
expert's ``b`` in L2. "reduce": ``E × cdiv(M, BM) × cdiv(N, BN)`` programs, each looping K over
its own group's range only.

Shared by the pointer kernels (``gemm_grouped.py``) and the TMA kernels
(``gemm_grouped_tma.py``).
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["tile_group", "tokens_tile", "reduce_tile"]


@triton.jit
def tile_group(offs_ptr, tile_m, R, E, BM: tl.constexpr):
    """Row tile ``tile_m``'s group and rows: walks the ends in order (then the tail past
    ``offs[-1]``, group E), counting each group's ``cdiv(size, BM)`` row tiles. Returns
    ``(group, hi, row0)``: the tile holds rows ``row0 + [0, BM)``, those below ``hi`` its
    own (its group starts at or before ``row0``); an idle program gets group -1, no rows."""
    group = tl.full([], -1, tl.int32)
    lo = tl.full([], 0, tl.int32)
    hi = tl.full([], 0, tl.int32)
    first = tl.full([], 0, tl.int32)
    start = tl.full([], 0, tl.int32)
    seen = tl.full([], 0, tl.int32)
    for e in range(0, E + 1):
        end = tl.load(offs_ptr + tl.minimum(e, E - 1)).to(tl.int32)
        end = tl.where(e == E, R, end)
        count = tl.cdiv(end - start, BM)
        hit = (tile_m >= seen) & (tile_m < seen + count)
        group = tl.where(hit, e, group)
        lo = tl.where(hit, start, lo)
        hi = tl.where(hit, end, hi)
        first = tl.where(hit, seen, first)
        seen += count
        start = end
    return group, hi, lo + (tile_m - first) * BM


@triton.jit
def tokens_tile(pid, offs_ptr, R, N, E, BM: tl.constexpr, BN: tl.constexpr):
    """Program ``pid``'s "tokens" tile (column tiles fastest): its group, first row and column,
    rows and columns with their masks, expert (clamped into range), and whether it has K steps
    to run (not the tail rows, group E, nor an idle program, group -1: zeros stored or
    nothing)."""
    n_tiles = tl.cdiv(N, BN)
    tile_m, tile_n = pid // n_tiles, pid % n_tiles
    group, hi, row0 = tile_group(offs_ptr, tile_m, R, E, BM)
    offs_m = row0 + tl.arange(0, BM)
    mmask = offs_m < hi                   # idle programs: group -1, row0 = hi = 0, no row
    offs_n = tile_n * BN + tl.arange(0, BN)
    nmask = offs_n < N
    expert = tl.minimum(tl.maximum(group, 0), E - 1)
    live = (group >= 0) & (group < E)
    return group, row0, tile_n * BN, offs_m, mmask, offs_n, nmask, expert, live


@triton.jit
def reduce_tile(pid, offs_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Program ``pid``'s "reduce" tile: its group e, the group's K range ``[k_lo, k_hi)``, the
    tile's first row and column, its rows and columns with their masks."""
    m_tiles, n_tiles = tl.cdiv(M, BM), tl.cdiv(N, BN)
    e = pid // (m_tiles * n_tiles)
    rest = pid % (m_tiles * n_tiles)
    tile_m, tile_n = rest // n_tiles, rest % n_tiles
    k_hi = tl.load(offs_ptr + e).to(tl.int32)
    k_lo = tl.where(e == 0, 0, tl.load(offs_ptr + tl.maximum(e - 1, 0)).to(tl.int32))
    offs_m = tile_m * BM + tl.arange(0, BM)
    offs_n = tile_n * BN + tl.arange(0, BN)
    return e, k_lo, k_hi, tile_m * BM, tile_n * BN, offs_m, offs_m < M, offs_n, offs_n < N
