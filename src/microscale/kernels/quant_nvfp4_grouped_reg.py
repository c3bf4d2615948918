"""NVFP4 row and column views of a grouped (MoE) token matrix in the register layout, one global
amax per expert, stochastic rounding from in-kernel Philox keyed per expert.

What ``kernels.grouped`` asks of an expert layer's tokens ``x [T, K]`` (sorted by expert, group
ends ``offs``; layouts in ``quant.grouped``): the row view (1x16 blocks along K: fprop's x,
dgrad's dy) and the column view of the padded layout (1x16 blocks along the tokens of
``x_padᵀ [K, bound]``, each expert's tokens zero-padded to a multiple of 16, the RHT first:
wgrad's xᵀ and dyᵀ), each expert quantized as its own tensor.

Layout
======
Both kernels walk the *padded* rows ``p`` in ``[16·NI, BC]`` tiles, as
``quant_nvfp4_reg`` walks a tensor's rows, and load them straight from x: a group of 16 padded
rows lies in one expert ``g`` (its padded start is a multiple of 16), so one lookup per group
gives ``l = p - pstart_g`` (the row inside the expert), whether the row holds a token
(``l < count_g``) and which (``t = start_g + l``); a padding row loads zeros. No padded copy of
x is written. The column view is then the dense kernel's (16 in-thread rows, the RHT as a
butterfly, codes packed with shifts) with the group's global scales; the row view is the
dense row view of the token rows, stored at row ``t`` (padding rows store nothing).

* **amax pass** (:func:`nvfp4_grouped_amax_kernel`): per tile the row view's ``max|x|`` and the
  column view's ``max|RHT(x)|`` (NaN read as 0) per group, folded into ``amax[0, g]`` and
  ``amax[1, g]``: one atomic max per tile and view where the tile lies in one expert (nearly
  every tile), one per group where it crosses experts.
* **quantize pass** (:func:`nvfp4_grouped_reg_kernel`): one launch for the views asked for;
  a pair whose row view is stochastically rounded goes as two launches (column view, then row
  view), as the dense split does (the row SR beside the column view does not fit the
  registers).

Numerics
========
Bit-identical with :func:`microscale.quant.grouped.quantize_segments` given the same SR bytes
(``SR = 1``: the caller's bytes, laid out as the views). ``SR = 2`` draws Philox in the kernel
with the dense kernels' counters *inside the expert's own tensor* (row view: ``l · K/16 +
block`` keyed by the expert's seed; column view: ``k · pcount_g/16 + (group - pstart_g/16)``
keyed by its column seed), so every expert's codes equal those the dense Triton quantizers give
that expert's tokens alone with the same seed (tested), never depending on the other experts.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..quant.grouped import padded_bound
from ._host import IN_DTYPE_CODE, cdiv, persistent_grid
from ._rht import finish_rotated
from ._utils import nvfp4_global_scales, tile_coords
from .quant_nvfp4 import row_exp_code
from .quant_nvfp4_reg import RHT_SIGN_MASK
from .quant_nvfp4_reg_views import (_row_tile, _row_view, _row_words, _store_row_scales,
                                    col_tile, tile_maxima)

__all__ = ["CONFIG", "group_tables", "nvfp4_grouped_amax_kernel", "nvfp4_grouped_reg_kernel",
           "nvfp4_reg_views", "quantize_nvfp4_grouped_views"]

# The dense reg pass's tile and launch (quant_nvfp4.CONFIG["REG"], "REG_AMAX"): [256, 64], 4
# warps. Not swept at grouped shapes yet. AMAX_PAIRS: the amax pass's RHT ends in pair maxima
# (as the dense pass's REG_AMAX["PAIRS"]; the same bits); on since session 51, call 7 (H200:
# the twin's bits with it on and off, NaN and 3e38 among the values; not timed here).
CONFIG = {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 2, "NUM_STAGES": 1,
          "AMAX_BC": 32, "AMAX_PROGS_PER_SM": 4, "AMAX_STAGES": 2, "AMAX_PAIRS": True}


@triton.jit
def _groups(tab_ptr, p, bound, n_seg):
    """Per first padded row ``p [NI, 1]`` of a 16-row group: its expert ``g``, row ``l``
    inside the expert, token row ``t`` of that row and the expert's token count. ``tab``:
    int32 ``[4·n_seg + bound]``: starts, pad_starts, counts, pad_counts, then each padded
    row's expert (``group_tables``)."""
    inb = p < bound
    g = tl.load(tab_ptr + 4 * n_seg + p, mask=inb, other=0)
    start = tl.load(tab_ptr + g)
    l = p - tl.load(tab_ptr + n_seg + g)
    count = tl.where(inb, tl.load(tab_ptr + 2 * n_seg + g), 0)
    return g, l, start + l, count


@triton.jit
def _gather16(x_ptr, t, l, count, c0, cols, NI: tl.constexpr, BC: tl.constexpr,
              IN_DTYPE: tl.constexpr):
    """The 16 raw tiles of a group's padded rows (``quant_nvfp4_reg_views._load16``'s layout): row
    j of group i is token row ``t_i + j`` where ``l_i + j < count_i``, else zeros."""
    if IN_DTYPE == 0:
        m = c0 + tl.arange(0, BC)[None, :]
        ptr = x_ptr + t * cols + m
        step = cols
        cmask = m < cols
    else:
        m = c0 // 2 + tl.arange(0, BC // 2)[None, :]
        ptr = x_ptr.to(tl.pointer_type(tl.int32)) + t * (cols // 2) + m
        step = cols // 2
        cmask = m < cols // 2
    xs = ()
    for j in tl.static_range(16):
        xs = xs + (tl.load(ptr + j * step, mask=cmask & (l + j < count), other=0),)
    return xs


@triton.jit
def nvfp4_grouped_amax_kernel(x_ptr, tab_ptr, amax_r_ptr, amax_c_ptr, bound, cols, n_seg, n_tc,
                              n_tiles,
                              IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr,
                              ROW: tl.constexpr, COL: tl.constexpr, COL_RHT: tl.constexpr,
                              SIGNS: tl.constexpr, NUM_STAGES: tl.constexpr,
                              PAIRS: tl.constexpr = False):
    """``amax_r[g] = max|x|`` over expert g's rows (row view), ``amax_c[g]`` its column view's
    (after the RHT); fp32 ``[n_seg]`` each, zeroed before (``_tables_kernel``)."""
    for tt in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(tt, n_tc, 16 * NI, BC)
        p = r0 + 16 * tl.arange(0, NI)[:, None]
        g, l, t, count = _groups(tab_ptr, p, bound, n_seg)
        raw = _gather16(x_ptr, t, l, count, c0, cols, NI, BC, IN_DTYPE)
        zero = tl.zeros((NI, BC // 2), dtype=tl.float32)
        acc_r, acc_c = tile_maxima(raw, zero, zero, IN_DTYPE, NI, BC,
                                   ROW or (COL and not COL_RHT), COL and COL_RHT, SIGNS,
                                   PAIRS=PAIRS)
        inb = p < bound
        g_lo = tl.min(tl.where(inb, g, 2147483647))
        g_hi = tl.max(tl.where(inb, g, -1))
        per_r = tl.max(acc_r, axis=1)[:, None]                         # [NI, 1]
        per_c = finish_rotated(tl.max(acc_c, axis=1)[:, None], IN_DTYPE) if COL_RHT else per_r
        if g_lo == g_hi:    # rows come sorted by expert: one atomic a tile and view
            if ROW:
                tl.atomic_max(amax_r_ptr + g_lo, tl.max(tl.max(per_r, axis=1), axis=0))
            if COL:
                tl.atomic_max(amax_c_ptr + g_lo, tl.max(tl.max(per_c, axis=1), axis=0))
        else:
            if ROW:
                tl.atomic_max(amax_r_ptr + g, per_r, mask=inb)
            if COL:
                tl.atomic_max(amax_c_ptr + g, per_c, mask=inb)


@triton.jit
def nvfp4_grouped_reg_kernel(x_ptr, tab_ptr, amax_r_ptr, amax_c_ptr, seed_r_ptr, seed_c_ptr,
                             qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr, bc_ptr, tokens, bound, cols,
                             n_seg, n_tc, n_tiles,
                             IN_DTYPE: tl.constexpr, NI: tl.constexpr, BC: tl.constexpr,
                             ROW: tl.constexpr, ROW_SR: tl.constexpr, COL: tl.constexpr,
                             COL_RHT: tl.constexpr, COL_SR: tl.constexpr, SIGNS: tl.constexpr,
                             NUM_STAGES: tl.constexpr, ROW_EXP: tl.constexpr = False):
    """Persistent loop over ``[16·NI, BC]`` tiles of padded rows: the row view (codes as int32
    words ``qr [tokens, cols/8]``, or ROW_EXP the expanded bf16 values ``qr [tokens, cols]``,
    ``tensor.py``; scale bytes ``sr [tokens, cols/16]``; at the token rows)
    and/or the column view (``qc [cols, bound/8]``, ``sc [cols, bound/16]``). ``amax_r`` /
    ``amax_c``: fp32 ``[n_seg]`` per view; ``seed_r`` / ``seed_c``: int64 ``[n_seg]``, each
    view's Philox keys (SR 2, used as int32 as the dense kernels use theirs); ``br``/``bc``:
    SR 1's bytes, ``[tokens, cols]`` / ``[cols, bound]``."""
    for tt in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(tt, n_tc, 16 * NI, BC)
        p = r0 + 16 * tl.arange(0, NI)[:, None]
        g, l, t, count = _groups(tab_ptr, p, bound, n_seg)
        raw = _gather16(x_ptr, t, l, count, c0, cols, NI, BC, IN_DTYPE)
        if COL:
            s_enc6, s_dec = nvfp4_global_scales(amax_c_ptr + g)
            seed = tl.load(seed_c_ptr + g).to(tl.int32) if COL_SR == 2 else 0
            # (without the dense views' bf16 pairs, session 59: at this [256, 64] tile they
            # spill, 120 bytes a thread offline, Triton 3.6; untimed here)
            col_tile(raw, s_enc6, s_dec, seed, bc_ptr, qc_ptr, sc_ptr, r0, c0, bound, cols,
                     tl.load(tab_ptr + 3 * n_seg + g) // 16, (p - l) // 16, IN_DTYPE, NI, BC,
                     COL_RHT, COL_SR, SIGNS, False, False, PAIRS=False)
        if ROW:
            s_enc6, s_dec = nvfp4_global_scales(amax_r_ptr + g)
            seed = tl.load(seed_r_ptr + g).to(tl.int32)[:, :, None] if ROW_SR == 2 else 0
            blk = c0 // 16 + tl.arange(0, BC // 16)[None, :]
            sb = ()
            for j in tl.static_range(0, 16, 2):
                if ROW_SR == 2:     # rows l + j and l + j + 1: one expert, one Philox a block
                    a0, b0, a1, b1 = _row_words(seed, l + j, blk, cols)
                else:
                    a0, b0, a1, b1 = 0, 0, 0, 0
                r_j = tl.where(l + j < count, t + j, tokens)        # padding: not stored
                r_k = tl.where(l + j + 1 < count, t + j + 1, tokens)
                sb = sb + (_row_view(_row_tile(raw[j], IN_DTYPE, NI, BC), s_enc6, s_dec, a0,
                                     b0, qr_ptr, br_ptr, r_j, c0, tokens, cols, NI, BC, ROW_SR,
                                     False, ROW_EXP),
                           _row_view(_row_tile(raw[j + 1], IN_DTYPE, NI, BC), s_enc6, s_dec,
                                     a1, b1, qr_ptr, br_ptr, r_k, c0, tokens, cols, NI, BC,
                                     ROW_SR, False, ROW_EXP))
            j16 = tl.arange(0, 16)[None, None, :]
            rows16 = tl.where(l[:, :, None] + j16 < count[:, :, None], t[:, :, None] + j16,
                              tokens)
            _store_row_scales(sr_ptr, sb, rows16, c0, tokens, cols, NI, BC, False)


@triton.jit
def _tables_kernel(offs_ptr, tab_ptr, amax_r_ptr, amax_c_ptr, n_seg, bound,
                   MULT: tl.constexpr, E_PAD: tl.constexpr, BLOCK: tl.constexpr):
    """The layout of ``quant.grouped.group_layout`` in one launch: int32 ``tab`` = starts,
    pad_starts, counts, pad_counts ``[n_seg]`` each, then every padded row's expert ``[bound]``
    (``searchsorted(pad_ends, p, right=True)``, the tail past the last group given to the
    last expert); program 0 also zeroes both amax buffers."""
    e = tl.arange(0, E_PAD)
    live = e < n_seg
    ends = tl.load(offs_ptr + e, mask=live, other=0)
    starts = tl.load(offs_ptr + e - 1, mask=live & (e > 0), other=0)
    counts = ends - starts
    pcounts = (counts + MULT - 1) // MULT * MULT
    pends = tl.cumsum(pcounts, axis=0)
    if tl.program_id(0) == 0:
        tl.store(tab_ptr + e, starts, mask=live)
        tl.store(tab_ptr + n_seg + e, pends - pcounts, mask=live)
        tl.store(tab_ptr + 2 * n_seg + e, counts, mask=live)
        tl.store(tab_ptr + 3 * n_seg + e, pcounts, mask=live)
        tl.store(amax_r_ptr + e, tl.zeros((E_PAD,), tl.float32), mask=live)
        tl.store(amax_c_ptr + e, tl.zeros((E_PAD,), tl.float32), mask=live)
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = tl.sum(((pends[None, :] <= p[:, None]) & live[None, :]).to(tl.int32), axis=1)
    tl.store(tab_ptr + 4 * n_seg + p, tl.minimum(g, n_seg - 1), mask=p < bound)


def group_tables(offs: torch.Tensor, multiple: int, bound: int):
    """``(tab, amax_r, amax_c)``: ``_tables_kernel``'s int32 table for group ends ``offs``
    (int32 ``[E]``) and two zeroed fp32 ``[E]`` amax buffers, from one launch."""
    n_seg, dev = offs.shape[0], offs.device
    tab = torch.empty(4 * n_seg + bound, dtype=torch.int32, device=dev)
    amax = [torch.empty(n_seg, dtype=torch.float32, device=dev) for _ in range(2)]
    e_pad = triton.next_power_of_2(max(n_seg, 2))
    block = min(1024, triton.next_power_of_2(max(16, 16384 // e_pad)))
    _tables_kernel[(cdiv(bound, block),)](offs.to(torch.int32).contiguous(), tab, *amax, n_seg,
                                          bound, multiple, e_pad, block, num_warps=4)
    return tab, amax[0], amax[1]


def _buffers(v, shape: tuple, x: torch.Tensor, expand: bool = False):
    """(int32 code words or, ``expand``, bf16 values; E4M3 scales, SR bytes, seeds) of a view
    ``shape`` (x itself where absent or unused: never read or written)."""
    if v is None:
        return x, x, x, x
    codes = torch.empty(shape, dtype=torch.bfloat16, device=x.device) if expand else \
        torch.empty((shape[0], shape[1] // 8), dtype=torch.int32, device=x.device)
    scale = torch.empty((shape[0], shape[1] // 16), dtype=torch.float8_e4m3fn, device=x.device)
    return (codes, scale, v[3].contiguous() if v[1] == 1 else x,
            v[2].reshape(-1).to(torch.int64).contiguous() if v[1] == 2 else x)


def quantize_nvfp4_grouped_views(x: torch.Tensor, offs: torch.Tensor, multiple: int, row, col,
                                 expand_row: bool = False):
    """``[(codes, E4M3 scales, amax [E]) or None, ...]`` of the row view of ``x [T, K]`` and
    the column view of its padded layout (group ends ``offs``, int32 ``[E]`` on the device;
    token ``multiple`` a multiple of 16: ``quant.grouped``). ``row``/``col``: None or
    ``(rht, sr, seeds, rand_bits)``, ``sr`` 0 (RNE), 1 (``rand_bits``: uint8 shaped as the
    view) or 2 (``seeds``: int64 ``[E]``, that view's Philox keys). The row view takes no RHT;
    ``expand_row`` writes it expanded (bf16 ``value · block scale``, ``tensor.py``).
    Four launches at most (layout, amax, two quantize passes); nothing read on the host."""
    tokens, cols = x.shape
    if (row is not None and row[0]) or cols % 16 or multiple % 16:
        raise ValueError("quantize_nvfp4_grouped_views: a row view without the RHT, K and the "
                         "token multiple multiples of 16")
    n_seg, dev = offs.shape[0], x.device
    bound = padded_bound(tokens, n_seg, multiple)
    if n_seg == 0 or max(tokens, bound) * cols >= 2**31:
        raise ValueError("quantize_nvfp4_grouped_views: at least one expert, and views of "
                         "fewer than 2^31 elements (int32 indexing)")
    tab, amax_r, amax_c = group_tables(offs, multiple, bound)
    bufs = [_buffers(row, (tokens, cols), x, expand_row), _buffers(col, (cols, bound), x)]
    cfg, code, col_rht = CONFIG, IN_DTYPE_CODE[x.dtype], bool(col is not None and col[0])
    n_tc = cdiv(cols, cfg["AMAX_BC"])
    n_tiles = cdiv(bound, 16 * cfg["NI"]) * n_tc
    nvfp4_grouped_amax_kernel[(persistent_grid(n_tiles, dev, cfg["AMAX_PROGS_PER_SM"]),)](
        x, tab, amax_r, amax_c, bound, cols, n_seg, n_tc, n_tiles, code, cfg["NI"],
        cfg["AMAX_BC"], row is not None, col is not None, col_rht, RHT_SIGN_MASK,
        cfg["AMAX_STAGES"], PAIRS=cfg.get("AMAX_PAIRS", True), num_warps=cfg["num_warps"])
    # a stochastically rounded row view beside the column view: two launches (the split)
    split = row is not None and col is not None and row[1] > 0
    n_tc = cdiv(cols, cfg["BC"])
    n_tiles = cdiv(bound, 16 * cfg["NI"]) * n_tc
    grid = (persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)
    (qr, sr, br, seed_r), (qc, sc, bc, seed_c) = bufs
    for lr, lc in ([(None, col), (row, None)] if split else [(row, col)]):
        nvfp4_grouped_reg_kernel[grid](
            x, tab, amax_r, amax_c, seed_r, seed_c, qr, sr.view(torch.uint8), br, qc,
            sc.view(torch.uint8), bc, tokens, bound, cols, n_seg, n_tc, n_tiles, code,
            cfg["NI"], cfg["BC"], lr is not None, lr[1] if lr else 0, lc is not None, col_rht,
            lc[1] if lc else 0, RHT_SIGN_MASK, cfg["NUM_STAGES"],
            row_exp_code(lr is not None and expand_row), num_warps=cfg["num_warps"])
    return [None if v is None else (b[0] if b[0].dtype == torch.bfloat16 else
                                    b[0].view(torch.uint8), b[1], a)
            for v, b, a in zip((row, col), bufs, (amax_r, amax_c))]


def _view(view, x, multiple: int, n_seg: int, seeds, bits, is_row: bool):
    """``(rht, sr, seeds, bits)`` of an NVFP4 1x16 view (RHT 16 or none) these kernels take,
    else None: no RHT on a row view, x in 4-byte aligned rows, at least one expert,
    int32-indexable views."""
    if not view or (is_row and view[1].get("rht")) or \
            x.shape[1] % 16 or multiple % 16 or x.data_ptr() % 4 or n_seg == 0 or \
            padded_bound(x.shape[0], n_seg, multiple) * x.shape[1] >= 2**31:
        return None
    sr = 0
    if view[1].get("stochastic"):
        if bits is None and seeds is None:
            raise ValueError("stochastic rounding needs per-expert seeds")
        sr = 1 if bits is not None else 2
    return (bool(view[1].get("rht")), sr, seeds, bits)


def nvfp4_reg_views(x, offs, multiple: int, row, col, seeds, row_bits, col_bits,
                    expand_row: bool = False):
    """The grouped op's NVFP4 views (``(fmt, options)`` or None each; 1x16 blocks, the RHT 16
    or none: ``kernels.grouped._fused_ok``) these kernels take, quantized together (:func:`quantize_nvfp4_grouped_views`; the column view's seeds are
    ``seeds + 1``, as ``ms.Linear`` keys a column view); None where they do not take a view
    (``[None, None]``: none). ``expand_row``: the row view written expanded."""
    x = x.contiguous()
    n = offs.shape[0]
    rv = _view(row, x, multiple, n, seeds, row_bits, True)
    cv = _view(col, x, multiple, n, None if seeds is None else seeds + 1, col_bits, False)
    if rv is None and cv is None:
        return [None, None]
    return quantize_nvfp4_grouped_views(x, offs, multiple, rv, cv, expand_row)
