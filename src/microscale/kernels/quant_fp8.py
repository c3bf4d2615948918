"""Fused FP8 blockwise quantization kernels (SPEC §8), bit-exact with ``quant.fp8``.

One launch. A program loads a ``[BR, BC]`` tile of x once and writes:

* ``block=(1, 128)`` row view: one scale per 128 consecutive elements of a row
  (``scale_inv`` fp32 ``[rows, cols/128]``);
* ``block=(1, 128)`` column view (``quantize_rowcol`` only): the same rule on ``xᵀ``, i.e. per
  128 consecutive *rows* of a column, written as ``data[cols, rows]`` and
  ``scale_inv[cols, rows/128]`` -- the DeepSeek-V3 activation/gradient pair for wgrad;
* ``block=(128, 128)`` (weights): one scale per tile (``scale_inv[rows/128, cols/128]``).

The scale rule mirrors ``fp8_scale_from_amax`` operation by operation::

    scale = fp8_max / vmax               (one IEEE fp32 division, tl.math.div_rn)
    vmax = 0 -> 1;  scale = inf -> the input dtype's max;  pow2: 2^floor(log2 scale)
    data  = cast_rne_satfinite(x * scale);   scale_inv = 1 / scale

Non-finite input (``check_finite=False``) as the reference: NaN is read as 0 and stored as the
NaN byte 0x7F; a block whose max is Inf gets scale 1 (its Inf saturates to ±fp8_max).

``amax`` (max|x| of the tensor) is folded in with an atomic max. Bytes per element for bf16
x: 2 read, 1 + 4/128 written per view.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..op_specs import PROLOGUES, apply_prologue
from ..quant.common import check_input
# FP8_MAX_OF, not FP8_MAX: the kernels take a parameter of that name
from ..quant.fp8 import FP8_MAX as FP8_MAX_OF
from ..tensor import QFormat, QuantizedTensor
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_views, exp2_int,
                     floor_log2_sig, persistent_grid, split_nan, tile_coords)
from .quant_rowcol_reg import fp8_byte, fp8_rowcol_reg_kernel, pow2_exponents

__all__ = ["quantize_fp8_block_triton", "quantize_rowcol_fp8_block_triton", "CONFIG"]

# ROWCOL: how a 1x128 row + column pair runs: "reg" (``quant_rowcol_reg``: the [128, 128] tile
# in registers, 4 consecutive rows per thread so the column view packs into words in-thread,
# division-free pow2 scales; pow2 scales only, "sub" serves the others; the default), "sub"
# (``_fp8_rowcol_sub_kernel``: [SUB_ROWS, 128] sub-tiles, two passes over the cached tile) or
# "tile" (one [128, 128] tile in registers); MICROSCALE_FP8_ROWCOL overrides. Bit-identical.
# Graph-replayed on an H100 (copy rate 3.0 TB/s), 16384x768 / 16384x3072: "reg" with 4 warps,
# 2 programs per SM, NaN byte from the hardware (NAN_SEL off) 33.0 / 98.3 µs (~72% of the copy
# rate at 3072), "sub" 52.2 / 169.2 µs (benchmarks/results/h100_20261125_session6/). SASS for
# sm_90 (benchmarks/sass_offline.py): 16.5 instructions per element for "reg" (25 with
# NAN_SEL), 46 for "sub".
CONFIG = {"BR_1x128": 32, "BR_1x128_rowcol": 128, "BC": 128, "num_warps": 8, "PROGS_PER_SM": 8,
          "NUM_STAGES": 2, "num_warps_rowcol": 4, "PROGS_PER_SM_rowcol": 4,
          "ROWCOL": os.environ.get("MICROSCALE_FP8_ROWCOL", "reg"), "SUB_ROWS": 64,
          "num_warps_sub": 4, "PROGS_PER_SM_sub": 8, "PACK_COL": True, "NUM_STAGES_sub": 1,
          "num_warps_reg": 4, "PROGS_PER_SM_reg": 2, "NUM_STAGES_reg": 1, "NAN_SEL": False}
_ROWCOL_MODES = ("reg", "sub", "tile")
_KEY = rowcol_key("fp8_block", "fp8_block")
# what ms.explain() says of a 1x128 pair, by the kernel that ran
_PATHS = {"reg": "triton (1x128 pair: tile in registers, quant_rowcol_reg)",
          "sub": "triton (1x128 pair: sub-tiled kernel, ROWCOL='sub')",
          "tile": "triton (1x128 pair: one-tile kernel, ROWCOL='tile')"}
_NOT_POW2 = "triton (1x128 pair: sub-tiled kernel, as the register kernel takes pow2 scales only)"

_IN_MAX = (3.4028234663852886e38, 3.3895313892515355e38, 65504.0)  # fp32, bf16, fp16
_OPTS = ("block", "pow2_scales", "fp8_dtype", "check_finite")


@triton.jit
def _scale_from_vmax(vmax, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr, POW2: tl.constexpr):
    scale = tl.math.div_rn(FP8_MAX, vmax)
    scale = tl.where(vmax == 0.0, 1.0, scale)
    scale = tl.where(scale > 3.4028234663852886e38, IN_MAX, scale)          # inf
    scale = tl.where(vmax > 3.4028234663852886e38, 1.0, scale)     # Inf in the block: unit
    if POW2:
        fl, _ = floor_log2_sig(scale)
        scale = exp2_int(fl)
    return scale


@triton.jit
def _fp8_byte(y, E5M2: tl.constexpr, nan):
    """FP8 bytes of fp32 ``y`` (RNE, satfinite), the NaN byte 0x7F where ``nan``."""
    return fp8_byte(y, E5M2, nan, True)


@triton.jit
def _quant_1x128(v, nan, q_ptr, s_ptr, offs_r, offs_c, c0, nrows, ncols, R: tl.constexpr,
                 C: tl.constexpr, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr,
                 POW2: tl.constexpr, E5M2: tl.constexpr):
    """1x128 blocks along the last axis of view tile ``v`` [R, C]; store data and scale_inv."""
    v3 = tl.reshape(v, (R, C // 128, 128))
    vmax = tl.max(tl.abs(v3), axis=2)
    scale = _scale_from_vmax(vmax, FP8_MAX, IN_MAX, POW2)
    data = _fp8_byte(tl.reshape(v3 * scale[:, :, None], (R, C)), E5M2, nan)
    r_ok = offs_r < nrows
    tl.store(q_ptr + offs_r[:, None] * ncols + offs_c[None, :], data,
             mask=r_ok[:, None] & (offs_c < ncols)[None, :])
    sx = c0 // 128 + tl.arange(0, C // 128)
    tl.store(s_ptr + offs_r[:, None] * (ncols // 128) + sx[None, :], tl.math.div_rn(1.0, scale),
             mask=r_ok[:, None] & (sx < ncols // 128)[None, :])
    return vmax                                                 # block maxima, for the amax


@triton.jit
def _quant_128x1(x, nan, q_ptr, s_ptr, offs_r, offs_c, r0, rows, cols, BR: tl.constexpr,
                 BC: tl.constexpr, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr,
                 POW2: tl.constexpr, E5M2: tl.constexpr):
    """Column view of tile ``x`` [128, BC]: blocks of 128 along x's rows, stored as xᵀ
    (``data[cols, rows]``, ``scale_inv[cols, rows/128]``) without transposing in registers."""
    scale = _scale_from_vmax(tl.max(tl.abs(x), axis=0), FP8_MAX, IN_MAX, POW2)   # [BC]
    data = _fp8_byte(x * scale[None, :], E5M2, nan)
    c_ok = offs_c < cols
    tl.store(q_ptr + offs_c[None, :] * rows + offs_r[:, None], data,
             mask=(offs_r < rows)[:, None] & c_ok[None, :])
    tl.store(s_ptr + offs_c * (rows // 128) + r0 // 128, tl.math.div_rn(1.0, scale),
             mask=c_ok)                       # r0 < rows: the column view needs rows % 128 == 0


@triton.jit
def _fp8_block_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc, n_tiles,
                      IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr, POW2: tl.constexpr,
                      E5M2: tl.constexpr, MODE: tl.constexpr, COL: tl.constexpr,
                      NUM_STAGES: tl.constexpr):
    """MODE 0: 1x128 row view (+ column view if COL); MODE 1: 128x128 tiles (BR = 128).

    Each program loops over tiles keeping running block maxima and folds them into amax once
    at the end (the column view's maxima are the same numbers).
    """
    acc1 = tl.zeros((BR, BC // 128), dtype=tl.float32)        # running block maxima
    TR: tl.constexpr = BR // 128 if BR >= 128 else 1          # (MODE 1 only)
    acc2 = tl.zeros((TR, BC // 128), dtype=tl.float32)        # (no reduction in the loop)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_r = r0 + tl.arange(0, BR)
        offs_c = c0 + tl.arange(0, BC)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
        x, nan = split_nan(x.to(tl.float32))
        if MODE == 0:
            acc1 = tl.maximum(acc1, _quant_1x128(x, nan, qr_ptr, sr_ptr, offs_r, offs_c, c0, rows,
                                                 cols, BR, BC, FP8_MAX, IN_MAX, POW2, E5M2))
            if COL:
                _quant_128x1(x, nan, qc_ptr, sc_ptr, offs_r, offs_c, r0, rows, cols, BR, BC,
                             FP8_MAX, IN_MAX, POW2, E5M2)
        else:
            acc2 = tl.maximum(acc2, _quant_128x128(x, nan, qr_ptr, sr_ptr, qc_ptr, sc_ptr, offs_r,
                                                   offs_c, r0, c0, rows, cols, mask, BR, BC,
                                                   FP8_MAX, IN_MAX, POW2, E5M2, COL))
    if MODE == 0:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc1, axis=1), axis=0))
    else:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc2, axis=1), axis=0))


@triton.jit
def _fp8_rowcol_sub_kernel(x_ptr, amax_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, rows, cols, n_tc,
                           n_tiles, BC: tl.constexpr, SUB: tl.constexpr, FP8_MAX: tl.constexpr,
                           IN_MAX: tl.constexpr, POW2: tl.constexpr, E5M2: tl.constexpr,
                           NUM_STAGES: tl.constexpr, PACK: tl.constexpr):
    """1x128 row and column views of ``[128, BC]`` tiles, walked as ``128/SUB`` sub-tiles of
    ``[SUB, BC]`` so that a thread holds SUB·BC/threads values instead of 128·BC/threads.

    Pass 1 quantizes each sub-tile's rows (the row view) and keeps the running column maxima;
    pass 2 reads the same sub-tiles again (from L1/L2: the tile was just read) and writes the
    column view with the tile's column scales. Same arithmetic per block as ``_quant_1x128``
    and ``_quant_128x1``, so the same bits; x is read from memory once, twice from cache.
    With PACK the column view's bytes are packed four rows to a uint32 before the transposing
    store (``[SUB/4, BC]`` words: a quarter of the elements through the layout conversion and
    4-byte stores instead of single bytes); same bytes in memory.
    """
    acc = tl.zeros((SUB, BC // 128), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, 128, BC)
        offs_c = c0 + tl.arange(0, BC)
        c_ok = offs_c < cols
        cmax = tl.zeros((BC,), dtype=tl.float32)
        for s in tl.static_range(128 // SUB):
            offs_r = r0 + s * SUB + tl.arange(0, SUB)
            mask = (offs_r < rows)[:, None] & c_ok[None, :]
            x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
            x, nan = split_nan(x.to(tl.float32))
            acc = tl.maximum(acc, _quant_1x128(x, nan, qr_ptr, sr_ptr, offs_r, offs_c, c0, rows,
                                               cols, SUB, BC, FP8_MAX, IN_MAX, POW2, E5M2))
            cmax = tl.maximum(cmax, tl.max(tl.abs(x), axis=0))
        scale = _scale_from_vmax(cmax, FP8_MAX, IN_MAX, POW2)                # [BC]
        for s in tl.static_range(128 // SUB):
            offs_r = r0 + s * SUB + tl.arange(0, SUB)
            mask = (offs_r < rows)[:, None] & c_ok[None, :]
            x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
            x, nan = split_nan(x.to(tl.float32))
            q = _fp8_byte(x * scale[None, :], E5M2, nan)
            if PACK:      # rows % 128 == 0 here, so whole words; bytes little-endian by row
                q4 = tl.reshape(q.to(tl.uint32), (SUB // 4, 4, BC))
                shift = (tl.arange(0, 4) * 8).to(tl.uint32)
                words = tl.sum(q4 << shift[None, :, None], axis=1)           # [SUB/4, BC]
                offs_w = (r0 + s * SUB) // 4 + tl.arange(0, SUB // 4)
                tl.store(qc_ptr.to(tl.pointer_type(tl.uint32)) + offs_c[None, :] * (rows // 4)
                         + offs_w[:, None], words,
                         mask=(offs_w < rows // 4)[:, None] & c_ok[None, :])
            else:
                tl.store(qc_ptr + offs_c[None, :] * rows + offs_r[:, None], q, mask=mask)
        tl.store(sc_ptr + offs_c * (rows // 128) + r0 // 128, tl.math.div_rn(1.0, scale),
                 mask=c_ok)
    tl.atomic_max(amax_ptr, tl.max(tl.max(acc, axis=1), axis=0))


@triton.jit
def _quant_128x128(x, nan, q_ptr, s_ptr, qt_ptr, st_ptr, offs_r, offs_c, r0, c0, rows, cols, mask,
                   BR: tl.constexpr, BC: tl.constexpr, FP8_MAX: tl.constexpr,
                   IN_MAX: tl.constexpr, POW2: tl.constexpr, E5M2: tl.constexpr,
                   COL: tl.constexpr):
    """128x128 tiles: one scale per tile, ``scale_inv[rows/128, cols/128]``. With COL also the
    exact transpose (SPEC §8: a weight's dgrad view), ``data[cols, rows]`` and
    ``scale_inv[cols/128, rows/128]``, from the same read."""
    x4 = tl.reshape(x, (BR // 128, 128, BC // 128, 128))
    tmax = tl.max(tl.max(tl.abs(x4), axis=3), axis=1)                 # [BR/128, BC/128]
    scale = _scale_from_vmax(tmax, FP8_MAX, IN_MAX, POW2)
    data = _fp8_byte(tl.reshape(x4 * scale[:, None, :, None], (BR, BC)), E5M2, nan)
    tl.store(q_ptr + offs_r[:, None] * cols + offs_c[None, :], data, mask=mask)
    ti = r0 // 128 + tl.arange(0, BR // 128)
    tj = c0 // 128 + tl.arange(0, BC // 128)
    s_inv = tl.math.div_rn(1.0, scale)
    s_ok = (ti < rows // 128)[:, None] & (tj < cols // 128)[None, :]
    tl.store(s_ptr + ti[:, None] * (cols // 128) + tj[None, :], s_inv, mask=s_ok)
    if COL:
        tl.store(qt_ptr + offs_c[:, None] * rows + offs_r[None, :], tl.trans(data),
                 mask=tl.trans(mask))
        tl.store(st_ptr + tj[None, :] * (rows // 128) + ti[:, None], s_inv, mask=s_ok)
    return tmax                                                 # tile maxima, for the amax


# --------------------------------------------------------------------------- host side
def _options(opts: dict):
    unknown = set(opts) - set(_OPTS)
    if unknown:
        raise KernelUnsupported(f"options {sorted(unknown)}")
    block = tuple(opts.get("block", (1, 128)))
    fp8_dtype = opts.get("fp8_dtype", torch.float8_e4m3fn)
    if block not in ((1, 128), (128, 128)):
        raise KernelUnsupported(f"block={block}")
    if fp8_dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise KernelUnsupported(f"fp8_dtype={fp8_dtype}")
    return block, bool(opts.get("pow2_scales", True)), fp8_dtype


def _result(data, scale_inv, amax, shape, dtype, block, pow2):
    return QuantizedTensor(fmt=QFormat.FP8_BLOCK, data=data, scale=scale_inv, amax=amax,
                           shape=shape, orig_dtype=dtype, block=block,
                           extra={"pow2_scales": pow2})


def _launch(x2, views, block, pow2, fp8_dtype, col):
    """views: [(data, scale_inv)] for the row view and, if ``col``, the column view."""
    rows, cols = x2.shape
    amax = torch.zeros((), dtype=torch.float32, device=x2.device)
    mode = 0 if block == (1, 128) else 1
    br = 128 if (mode == 1 or col) else CONFIG["BR_1x128"]
    if col:
        br = CONFIG["BR_1x128_rowcol"]
    bc = CONFIG["BC"]
    (qr, sr), (qc, sc) = views[0], views[1] if col else views[0]
    fp8_max = FP8_MAX_OF[fp8_dtype]
    n_tc = cdiv(cols, bc)
    n_tiles = cdiv(rows, br) * n_tc
    kind = _rowcol_mode() if col and mode == 0 else None
    if kind is not None:
        note_path("quantize_rowcol", _KEY, _PATHS[kind] if pow2 or kind != "reg" else _NOT_POW2)
    if kind == "reg" and pow2:
        _launch_reg(x2, amax, qr, sr, qc, sc, fp8_max, fp8_dtype)
        return amax
    if kind in ("reg", "sub"):
        grid = (persistent_grid(n_tiles, x2.device, CONFIG["PROGS_PER_SM_sub"]),)
        _fp8_rowcol_sub_kernel[grid](x2, amax, qr.view(torch.uint8), sr, qc.view(torch.uint8),
                                     sc, rows, cols, n_tc, n_tiles, bc, CONFIG["SUB_ROWS"],
                                     fp8_max, _IN_MAX[IN_DTYPE_CODE[x2.dtype]], pow2,
                                     fp8_dtype == torch.float8_e5m2, CONFIG["NUM_STAGES_sub"],
                                     CONFIG["PACK_COL"], num_warps=CONFIG["num_warps_sub"])
        return amax
    progs, warps = (CONFIG["PROGS_PER_SM_rowcol"], CONFIG["num_warps_rowcol"]) if col else \
        (CONFIG["PROGS_PER_SM"], CONFIG["num_warps"])
    grid = (persistent_grid(n_tiles, x2.device, progs),)
    _fp8_block_kernel[grid](x2, amax, qr.view(torch.uint8), sr, qc.view(torch.uint8), sc,
                            rows, cols, n_tc, n_tiles, IN_DTYPE_CODE[x2.dtype], br, bc, fp8_max,
                            _IN_MAX[IN_DTYPE_CODE[x2.dtype]], pow2,
                            fp8_dtype == torch.float8_e5m2, mode, col, CONFIG["NUM_STAGES"],
                            num_warps=warps)
    return amax


def _rowcol_mode() -> str:
    mode = CONFIG["ROWCOL"]
    if mode not in _ROWCOL_MODES:
        raise ValueError(f"quant_fp8.CONFIG['ROWCOL'] (MICROSCALE_FP8_ROWCOL) must be one of "
                         f"{_ROWCOL_MODES}, got {mode!r}")
    return mode


def _launch_reg(x2, amax, qr, sr, qc, sc, fp8_max, fp8_dtype, write_row: bool = True,
                prologue=None, write_col: bool = True):
    """``quant_rowcol_reg``'s kernel: rows and cols are multiples of 128 (``check_views``);
    ``write_row=False``: the column view alone (``qr``/``sr`` are not written), ``write_col``
    likewise; ``prologue`` ``(name, y)``: of ``op(x2, y)``."""
    rows, cols = x2.shape
    n_tc, n_tiles = cols // 128, (rows // 128) * (cols // 128)
    exp, in_exp = pow2_exponents(fp8_max, _IN_MAX[IN_DTYPE_CODE[x2.dtype]])
    grid = (persistent_grid(n_tiles, x2.device, CONFIG["PROGS_PER_SM_reg"]),)
    pro, y = (0, None) if prologue is None else (PROLOGUES[prologue[0]][2], prologue[1])
    fp8_rowcol_reg_kernel[grid](x2, amax, qr.view(torch.uint8), sr, qc.view(torch.uint8), sc,
                                rows, cols, n_tc, n_tiles, *sr.stride(), *sc.stride(), exp, in_exp,
                                fp8_dtype == torch.float8_e5m2, CONFIG["NAN_SEL"],
                                CONFIG["NUM_STAGES_reg"], write_row, x2 if y is None else y,
                                pro, IN_DTYPE_CODE[x2.dtype], write_col,
                                num_warps=CONFIG["num_warps_reg"])


def _buffers(vr, vc, block, fp8_dtype, dev, col_major=False):
    """Codes and scales of a ``[vr, vc]`` view; ``col_major``: the scales in the op's 1x128
    layout (``op_specs.scale_col_major``), for the kernels that take scale strides."""
    data = torch.empty((vr, vc), dtype=fp8_dtype, device=dev)
    sr, sc = vr // block[0], vc // block[1]
    scale = torch.empty_strided((sr, sc), (1, sr), dtype=torch.float32, device=dev) \
        if col_major else torch.empty((sr, sc), dtype=torch.float32, device=dev)
    return data, scale


@register_kernel("quantize", QFormat.FP8_BLOCK.value)
def quantize_fp8_block_triton(x: torch.Tensor, **opts) -> QuantizedTensor:
    """Kernel twin of :func:`microscale.quant.quantize_fp8_block` (same signature)."""
    block = tuple(opts.get("block", (1, 128)))
    if block not in ((1, 128), (128, 128)):
        raise KernelUnsupported(f"block={block}")
    check_input(x, "fp8_block", block[1], block[0], opts.get("check_finite", True))
    check_kernel_input(x)
    block, pow2, fp8_dtype = _options(opts)
    x2 = x.reshape(-1, x.shape[-1])
    view = _buffers(*x2.shape, block, fp8_dtype, x.device)
    amax = _launch(x2, [view], block, pow2, fp8_dtype, col=False)
    return _result(*view, amax, x.shape, x.dtype, block, pow2)


def quantize_rowcol_fp8_block_triton(x: torch.Tensor, row, col, prologue=None):
    """Kernel twin of ``ops.rowcol_reference`` for FP8 block views (either may be None):
    1x128 both ways (activations, gradients), or 128x128 and its exact transpose (weights).
    ``prologue`` (a hint, ``(name, x2)``): the views of ``op(x, x2)`` (``op_specs.PROLOGUES``),
    fused into the register kernel's loads for a 1x128 row or column view alone, applied first
    otherwise."""
    x2 = x.reshape(-1, x.shape[-1])
    parsed = [_options(v[1]) if v else None for v in (row, col)]
    if row and col and parsed[0] != parsed[1]:
        raise KernelUnsupported("row and column views with different options")
    block, pow2, fp8_dtype = next(p for p in parsed if p)
    check_views(x2, row, col, lambda fmt, opts: (block[1], block[0]))
    check_kernel_input(x)
    rows, cols = x2.shape
    reg = block == (1, 128) and pow2 and _rowcol_mode() == "reg" \
        and not (rows % 128 or cols % 128)
    col_alone = reg and not row
    if prologue is not None:
        prologue = (prologue[0], None if prologue[1] is None
                    else prologue[1].reshape(x2.shape).contiguous())
        if not reg or (row and col):       # fused: either view alone, in the register kernel
            x2, prologue = apply_prologue(prologue[0], x2, prologue[1]), None
    if row and col:
        # the register kernel writes the 1x128 scales straight into the op's layout
        cm = block == (1, 128) and pow2 and _rowcol_mode() == "reg"
        views = [_buffers(rows, cols, block, fp8_dtype, x.device, cm),
                 _buffers(cols, rows, block, fp8_dtype, x.device, cm)]
        amax = _launch(x2, views, block, pow2, fp8_dtype, col=True)
        return (_result(*views[0], amax, torch.Size((rows, cols)), x.dtype, block, pow2),
                _result(*views[1], amax, torch.Size((cols, rows)), x.dtype, block, pow2))
    if row and reg:
        # a row view alone (e.g. fprop's x when backward recomputes xᵀ): the register kernel,
        # columns unwritten, the scales straight into the op's layout
        note_path("quantize_rowcol", "fp8_block|none", "triton (1x128 row view alone: tile in "
                  "registers, quant_rowcol_reg" + (f"; {prologue[0]} fused into its loads)"
                                                   if prologue else ")"))
        view = _buffers(rows, cols, block, fp8_dtype, x.device, col_major=True)
        amax = torch.zeros((), dtype=torch.float32, device=x.device)
        _launch_reg(x2, amax, *view, *view, FP8_MAX_OF[fp8_dtype], fp8_dtype, write_col=False,
                    prologue=prologue)
        return _result(*view, amax, torch.Size((rows, cols)), x.dtype, block, pow2), None
    if row:
        view = _buffers(rows, cols, block, fp8_dtype, x.device)
        amax = _launch(x2, [view], block, pow2, fp8_dtype, col=False)
        return _result(*view, amax, torch.Size((rows, cols)), x.dtype, block, pow2), None
    if col_alone:
        # a column view alone (e.g. recomputed in backward): the register kernel, rows unwritten
        note_path("quantize_rowcol", "none|fp8_block", "triton (1x128 column view alone: tile "
                  "in registers, quant_rowcol_reg" + (f"; {prologue[0]} fused into its loads)"
                                                      if prologue else ")"))
        view = _buffers(cols, rows, block, fp8_dtype, x.device, col_major=True)
        amax = torch.zeros((), dtype=torch.float32, device=x.device)
        fp8_max = FP8_MAX_OF[fp8_dtype]
        _launch_reg(x2, amax, view[0], view[1], *view, fp8_max, fp8_dtype, write_row=False,
                    prologue=prologue)
        return None, _result(*view, amax, torch.Size((cols, rows)), x.dtype, block, pow2)
    x_t = x2.t().contiguous()   # a column view alone: the row kernel on the transpose
    view = _buffers(cols, rows, block, fp8_dtype, x.device)
    amax = _launch(x_t, [view], block, pow2, fp8_dtype, col=False)
    return None, _result(*view, amax, torch.Size((cols, rows)), x.dtype, block, pow2)


quantize_rowcol_fp8_block_triton.hints = ("prologue",)

for _key in ("fp8_block|fp8_block", "fp8_block|none", "none|fp8_block"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_fp8_block_triton)
