"""Many weights quantized in one launch: every FP8 128×128 weight pair of a model at once.

A model quantizes each weight's two views (W for fprop, its exact transpose Wᵀ for dgrad;
SPEC §8) once per optimizer step. One launch per weight costs a launch and a tail per
tensor: on an H100 a 768×768 fp32 weight takes ~16 µs for ~3 µs of bytes, 2.2 ms of a 125m
fp8_blockwise step for its 120 weights (session 8 profile). Here one persistent launch walks
the 128×128 tiles of *all* the weights:

* a **tile table** (int32 ``[n_tiles, 3]``: tensor index, row0, col0) says which tile of which
  tensor each step of the loop quantizes; it depends on the shapes only;
* a **tensor table** (int64 ``[n, 4]``: the input's address, rows, cols, the offset of its
  codes and scales in the outputs) gives the tile's tensor; the addresses are the parameters'
  own storage, stable across steps (a parameter that moves makes a new table: one host-to-
  device copy, so not while a CUDA graph is being captured);
* the outputs are four flat buffers, each tensor's views at fixed offsets
  (``ops_many.flat_offsets``):
  codes ``[rows, cols]`` and scales ``[rows/128, cols/128]`` of W, codes ``[cols, rows]`` and
  scales ``[cols/128, rows/128]`` of Wᵀ; plus ``amax[n]``.

Each tile is quantized by ``quant_fp8._quant_128x128``, the per-tensor kernel's own tile code,
so the bytes are those of ``quantize_rowcol`` tensor by tensor (tested against it and the
reference). Rows and columns must be multiples of 128 (whole tiles); the caller quantizes any
other weight on its own.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, register_kernel
from ..ops_many import flat_offsets
from ..quant.fp8 import FP8_MAX as FP8_MAX_OF   # not FP8_MAX: the kernels take a parameter of that name
from ._utils import IN_DTYPE_CODE, persistent_grid, split_nan
from .quant_fp8 import _IN_MAX, _options, _quant_128x128

__all__ = ["quantize_rowcol_many_fp8_block_triton", "tables", "table_tile", "check_inputs",
           "CONFIG"]

CONFIG = {"num_warps": 8, "PROGS_PER_SM": 2, "TABLES_CACHED": 16}
_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


@triton.jit
def in_ptr(addr, IN_DTYPE: tl.constexpr):
    if IN_DTYPE == 0:
        return addr.to(tl.pointer_type(tl.float32))
    elif IN_DTYPE == 1:
        return addr.to(tl.pointer_type(tl.bfloat16))
    else:
        return addr.to(tl.pointer_type(tl.float16))


@triton.jit
def table_tile(tab_ptr, tile_ptr, t, IN_DTYPE: tl.constexpr, BR: tl.constexpr,
               BC: tl.constexpr):
    """Tile ``t`` of the tables (:func:`tables`): its tensor index, input pointer, shape, flat
    output offsets, first row and column, and its row and column indices."""
    i = tl.load(tile_ptr + 3 * t)
    r0 = tl.load(tile_ptr + 3 * t + 1)
    c0 = tl.load(tile_ptr + 3 * t + 2)
    x_ptr = in_ptr(tl.load(tab_ptr + 5 * i), IN_DTYPE)
    rows = tl.load(tab_ptr + 5 * i + 1).to(tl.int32)
    cols = tl.load(tab_ptr + 5 * i + 2).to(tl.int32)
    q_off = tl.load(tab_ptr + 5 * i + 3)
    s_off = tl.load(tab_ptr + 5 * i + 4)
    return i, x_ptr, rows, cols, q_off, s_off, r0, c0, r0 + tl.arange(0, BR), c0 + tl.arange(0, BC)


@triton.jit
def fp8_block_many_kernel(tab_ptr, tile_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, amax_ptr, n_tiles,
                          IN_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, IN_MAX: tl.constexpr,
                          POW2: tl.constexpr, E5M2: tl.constexpr):
    """128×128 tiles of many tensors: W's codes and scales and those of Wᵀ (the transpose of
    the same bytes), the tensor's amax by atomic max."""
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        i, x_ptr, rows, cols, q_off, s_off, r0, c0, offs_r, offs_c = table_tile(
            tab_ptr, tile_ptr, t, IN_DTYPE, 128, 128)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :])
        x, nan = split_nan(x.to(tl.float32))
        tmax = _quant_128x128(x, nan, qr_ptr + q_off, sr_ptr + s_off, qc_ptr + q_off,
                              sc_ptr + s_off, offs_r, offs_c, r0, c0, rows, cols, mask, 128, 128,
                              FP8_MAX, IN_MAX, POW2, E5M2, True)
        tl.atomic_max(amax_ptr + i, tl.max(tl.max(tmax, axis=1), axis=0))


def tables(xs: list[torch.Tensor], tile: tuple[int, int],
           block: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(tensor table, tile table) for these inputs walked in ``tile`` steps, with each
    tensor's offsets in the flat outputs for scales of one per ``block``; cached by the
    inputs' addresses and shapes (a new table is a host-to-device copy: not while a CUDA
    graph is being captured)."""
    key = (xs[0].device, tile, block, *((x.data_ptr(), *x.shape) for x in xs))
    if key not in _TABLES:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise KernelUnsupported("a new weight table while a CUDA graph is being captured "
                                    "(run one step before capturing)")
        q_offs, s_offs, _, _ = flat_offsets([x.shape for x in xs], block)
        tab = [[x.data_ptr(), x.shape[0], x.shape[1], qo, so]
               for x, qo, so in zip(xs, q_offs, s_offs)]
        tiles = [[i, r0, c0] for i, x in enumerate(xs)
                 for r0 in range(0, x.shape[0], tile[0]) for c0 in range(0, x.shape[1], tile[1])]
        if len(_TABLES) >= CONFIG["TABLES_CACHED"]:
            _TABLES.pop(next(iter(_TABLES)))
        dev = xs[0].device
        _TABLES[key] = (torch.tensor(tab, dtype=torch.int64, device=dev),
                        torch.tensor(tiles, dtype=torch.int32, device=dev))
    return _TABLES[key]


def _check(xs: list[torch.Tensor], row, col):
    if not xs:
        raise KernelUnsupported("no tensors")
    if row is None or col is None or row != col:
        raise KernelUnsupported("both views, with the same options")
    parsed = _options(row[1])
    if parsed[0] != (128, 128):
        raise KernelUnsupported(f"block {parsed[0]}: the weights' 128x128 tiles only")
    check_inputs(xs, 128)
    return parsed


def check_inputs(xs: list[torch.Tensor], tile: int) -> None:
    """Whole ``tile × tile`` tiles of 2-D contiguous tensors of one dtype and device."""
    x0 = xs[0]
    for x in xs:
        if x.dim() != 2 or x.shape[0] % tile or x.shape[1] % tile:
            raise KernelUnsupported(f"shape {tuple(x.shape)}: whole {tile}x{tile} tiles only")
        if x.dtype != x0.dtype or x.device != x0.device or not x.is_contiguous():
            raise KernelUnsupported("one dtype, one device, contiguous tensors")
        if x.dtype not in IN_DTYPE_CODE:
            raise KernelUnsupported(f"dtype {x.dtype}")


def quantize_rowcol_many_fp8_block_triton(xs: list[torch.Tensor], row, col) -> list[torch.Tensor]:
    """Kernel twin of ``ops.rowcol_many_reference`` for FP8 128×128 pairs: the flat outputs
    ``[codes W, scales W, codes Wᵀ, scales Wᵀ, amax]``."""
    _, pow2, fp8_dtype = _check(xs, row, col)
    _, _, nq, ns = flat_offsets([x.shape for x in xs], (128, 128))
    dev = xs[0].device
    tab, tiles = tables(xs, (128, 128), (128, 128))
    qr, qc = (torch.empty(nq, dtype=fp8_dtype, device=dev) for _ in range(2))
    sr, sc = (torch.empty(ns, dtype=torch.float32, device=dev) for _ in range(2))
    amax = torch.zeros(len(xs), dtype=torch.float32, device=dev)
    n_tiles = tiles.shape[0]
    grid = (persistent_grid(n_tiles, dev, CONFIG["PROGS_PER_SM"]),)
    fp8_block_many_kernel[grid](tab, tiles, qr.view(torch.uint8), sr, qc.view(torch.uint8), sc,
                                amax, n_tiles, IN_DTYPE_CODE[xs[0].dtype],
                                FP8_MAX_OF[fp8_dtype],
                                _IN_MAX[IN_DTYPE_CODE[xs[0].dtype]], pow2,
                                fp8_dtype == torch.float8_e5m2, num_warps=CONFIG["num_warps"])
    return [qr, sr, qc, sc, amax]


register_kernel("quantize_rowcol_many", "fp8_block|fp8_block")(
    quantize_rowcol_many_fp8_block_triton)
