"""NVFP4 quantization of a grouped (MoE) token matrix with one global amax per expert, fused.

Twin of the NVFP4 branch of :func:`microscale.quant.grouped.quantize_segments` (bit-exact, tested
in the interpreter). The source is a row-major ``src [rows, cols]`` whose *rows* carry an
expert id ``seg[rows]``:

* row view (``COL=False``): ``src = x [T, K]``, quantized along K; a row's amax is its expert's;
* column view (``COL=True``): ``src = x_pad [bound, K]`` (the padded layout of
  ``quant.grouped``, every expert starting at a multiple of 16), quantized along the tokens,
  i.e. the rows of ``srcᵀ``; each 16-token block lies in one expert, whose amax it uses.

Two launches, as the per-tensor kernels (``quant_nvfp4``):

1. **amax pass** -- per tile, ``max|v|`` per source row (``v`` after the 16-point RHT along the
   quantized axis when asked, rounded to the input dtype, NaN read as 0), folded into
   ``amax[seg[row]]``: one atomic max per tile where its rows are one expert's (nearly every
   tile: rows come sorted by expert), one per row where it crosses experts.
2. **quantize pass** -- per tile, the per-row (row view) or per-block (column view) global
   scales ``S_enc·(1/6)`` and ``S_dec`` from the expert's amax, then
   ``quant_nvfp4_rows.quantize_rows``, the per-tensor kernel's block arithmetic, with those
   scales broadcast instead of one scalar (the column view through one in-register transpose
   of the input-dtype tile). Stochastic rounding reads the caller's bytes (``rand_bits``).

Nothing is read on the host; the launch sizes depend on the shapes only.

Token views now go to the register-layout kernels (``quant_nvfp4_grouped_reg``, 1.7-1.9x
faster at moe-1b's pairs); this kernel keeps the stacked expert weights' 16x16 tiles
(``ops_experts``), a row view with the RHT, and the token views with
``kernels.grouped.CONFIG["NVFP4_REG"]`` off.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._rht import rht_tile
from ._utils import (
    IN_DTYPE_CODE,
    cdiv,
    persistent_grid,
    rht_matrix_on,
    split_nan,
    tile_coords,
)
from .quant_nvfp4_rows import quantize_rows

__all__ = ["CONFIG", "quantize_nvfp4_segments_triton"]

# Tile: 32 rows x 64 columns, 4 warps, 16 programs per SM. Swept at moe-1b's x [32768, 1024]
# on an H100 (session 15 call 9, graph-replayed, amax + quantize pass): the padded column
# view with RHT + SR 0.312 -> 0.230 ms, the row view with SR 0.131 -> 0.127 ms against the
# 64 x 64 tile before (8 warps, 128 x 32 and 32 x 32 tiles were slower).
CONFIG = {"BR": 32, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 16}


@triton.jit
def _scales(amax):
    """``(fp32(S_enc · fp32(1/6)), S_dec)`` elementwise (SPEC §2 step 2; amax 0 -> FLT_MAX)."""
    s_enc = tl.minimum(tl.math.div_rn(2688.0, amax), 3.4028234663852886e38)
    s_enc = tl.where(s_enc == 0.0, 1.0, s_enc)
    return s_enc * 0.1666666716337204, tl.math.div_rn(1.0, s_enc)


@triton.jit
def _load(x_ptr, seg_ptr, r0, c0, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    offs_r = r0 + tl.arange(0, BR)
    offs_c = c0 + tl.arange(0, BC)
    mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
    x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
    seg = tl.load(seg_ptr + offs_r, mask=offs_r < rows, other=0)
    return x, seg, offs_r, offs_c


@triton.jit
def _amax_kernel(x_ptr, seg_ptr, amax_ptr, m_ptr, rows, cols, n_tc, n_tiles,
                 IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                 COL: tl.constexpr, RHT: tl.constexpr):
    i16 = tl.arange(0, 16)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        x, seg, offs_r, _ = _load(x_ptr, seg_ptr, r0, c0, rows, cols, BR, BC)
        if COL:
            v = tl.trans(x).to(tl.float32)                          # [BC, BR]: blocks of tokens
            if RHT:
                v = rht_tile(v, tl.load(m_ptr + i16[:, None] * 16 + i16[None, :]), BC, BR, 16,
                             IN_DTYPE)
            per_row = tl.max(tl.abs(split_nan(v)[0]), axis=0)
        else:
            v = x.to(tl.float32)
            if RHT:
                v = rht_tile(v, tl.load(m_ptr + i16[:, None] * 16 + i16[None, :]), BR, BC, 16,
                             IN_DTYPE)
            per_row = tl.max(tl.abs(split_nan(v)[0]), axis=1)
        # rows come sorted by expert, so a tile nearly always lies in one: one atomic for the
        # tile then (a per-row atomic on one address serialised 64 a tile: 69 ms of a 255 ms
        # moe-1b nvfp4 step on an H100), one per row only where the tile crosses experts
        valid = offs_r < rows
        seg_lo = tl.min(tl.where(valid, seg, 2147483647))
        seg_hi = tl.max(tl.where(valid, seg, -1))
        if seg_lo == seg_hi:
            tl.atomic_max(amax_ptr + seg_lo, tl.max(tl.where(valid, per_row, 0.0)))
        else:
            tl.atomic_max(amax_ptr + seg, per_row, mask=valid)


@triton.jit
def _quant_kernel(x_ptr, seg_ptr, amax_ptr, m_ptr, bits_ptr, q_ptr, s_ptr, rows, cols, n_tc,
                  n_tiles, IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                  COL: tl.constexpr, RHT: tl.constexpr, SR: tl.constexpr,
                  TWO_D: tl.constexpr = False, EXP: tl.constexpr = False):
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        x, seg, offs_r, offs_c = _load(x_ptr, seg_ptr, r0, c0, rows, cols, BR, BC)
        s_enc6, s_dec = _scales(tl.load(amax_ptr + seg, mask=offs_r < rows, other=0.0))
        if COL:          # one expert per 16-token block: its scales, one per block
            s_enc6 = tl.max(tl.reshape(s_enc6, (BR // 16, 16)), axis=1)
            s_dec = tl.max(tl.reshape(s_dec, (BR // 16, 16)), axis=1)
            quantize_rows(tl.trans(x).to(tl.float32), s_enc6[None, :], s_dec[None, :], m_ptr, 0,
                          q_ptr, s_ptr, bits_ptr, offs_c, r0, cols, rows, IN_DTYPE, BC, BR, RHT,
                          False, SR)
        else:
            quantize_rows(x.to(tl.float32), s_enc6[:, None], s_dec[:, None], m_ptr, 0, q_ptr,
                          s_ptr, bits_ptr, offs_r, c0, rows, cols, IN_DTYPE, BR, BC, RHT, TWO_D,
                          SR, EXP)


def quantize_nvfp4_segments_triton(src: torch.Tensor, seg: torch.Tensor, n_seg: int, col: bool,
                                   rht: bool, rand_bits: torch.Tensor | None,
                                   two_d: bool = False, expand: bool = False):
    """``(codes, E4M3 scales, amax [n_seg])`` of the row view of ``src`` (``col=False``) or of
    ``srcᵀ`` (``col=True``), one amax per expert ``seg[row of src]``; ``rand_bits`` (uint8, one
    per element of the view) switches stochastic rounding on. ``two_d`` (row view only): 16x16
    scale tiles, as expert weights use (every expert's rows a multiple of 16: a tile never
    spans two experts). ``expand`` (row view only): the codes written as the expanded bf16
    ``value · block_scale`` (``tensor.py``) instead."""
    if two_d and (col or rht or src.shape[0] % 16):
        raise ValueError("quantize_nvfp4_segments_triton: 16x16 tiles take a row view without "
                         "the RHT, rows a multiple of 16")
    if expand and col:
        raise ValueError("quantize_nvfp4_segments_triton: expand is for the row view")
    src = src.contiguous()
    rows, cols = src.shape
    vr, vc = (cols, rows) if col else (rows, cols)
    dev, cfg = src.device, CONFIG
    seg32 = seg.to(torch.int32).contiguous()
    amax = torch.zeros(n_seg, dtype=torch.float32, device=dev)
    codes = torch.empty((vr, vc), dtype=torch.bfloat16, device=dev) if expand else \
        torch.empty((vr, vc // 2), dtype=torch.uint8, device=dev)
    scale = torch.empty((vr, vc // 16), dtype=torch.float8_e4m3fn, device=dev)
    m = rht_matrix_on(16, dev)
    bits = rand_bits.contiguous() if rand_bits is not None else scale.view(torch.uint8)  # unread
    n_tc = cdiv(cols, cfg["BC"])
    n_tiles = cdiv(rows, cfg["BR"]) * n_tc
    grid = (persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)
    code = IN_DTYPE_CODE[src.dtype]
    _amax_kernel[grid](src, seg32, amax, m, rows, cols, n_tc, n_tiles, code, cfg["BR"],
                       cfg["BC"], col, rht, num_warps=cfg["num_warps"])
    _quant_kernel[grid](src, seg32, amax, m, bits, codes, scale.view(torch.uint8), rows, cols,
                        n_tc, n_tiles, code, cfg["BR"], cfg["BC"], col, rht,
                        1 if rand_bits is not None else 0, two_d, expand,
                        num_warps=cfg["num_warps"])
    return codes, scale, amax
