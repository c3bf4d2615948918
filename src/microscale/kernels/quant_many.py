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

Each tile is quantized by the per-tensor kernels' own tile code, so the bytes are those of
``quantize_rowcol`` tensor by tensor (tested against it and the reference): with power-of-two
scales (every preset) the register pair kernel's ``TILE`` arithmetic
(``quant_rowcol_reg.fp8_rowcol_reg_kernel``: 4 rows a thread, Wᵀ's bytes joined into words
in-thread, :func:`fp8_w128_many_kernel`; inputs 16-byte aligned), else
``quant_fp8._quant_128x128`` (``ms.explain()`` says which, and why). Rows and columns must be
multiples of 128 (whole tiles); the caller quantizes any other weight on its own.

Measured (H200, session 46, ``bench_many.py``, the 1b weight set, 881M fp32 parameters,
graph-replayed): ``_quant_128x128`` in one launch 4.85 ms (26% of the copy rate), slower than
one register-kernel launch per weight (2.69 ms, 46%): its tile code is the slower one, and an
address cast from the table's integers carries no alignment, so its loads do not vectorize
(the lesson of ``quant_many_mx``). Hence the register tile here, its input addressed from the
first tensor's pointer and the table's values stated multiples of what the launch checks.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, note_path, register_kernel
from ..ops_many import flat_offsets
from ..quant.fp8 import FP8_MAX as FP8_MAX_OF   # not FP8_MAX: the kernels take a parameter of that name
from ._utils import IN_DTYPE_CODE, persistent_grid, split_nan
from .quant_fp8 import _IN_MAX, _options, _quant_128x128
from .quant_fp8 import CONFIG as FP8_CONFIG
from .quant_rowcol_reg import (_load_tile, _store_col_words, fp8_byte, pow2_exponents,
                               pow2_scale)

__all__ = ["quantize_rowcol_many_fp8_block_triton", "tables", "table_tile", "aligned_tile",
           "check_inputs", "fp8_w128_many_kernel", "CONFIG"]

# KERNEL "reg": power-of-two scales through fp8_w128_many_kernel (the register tile, 4 warps and
# 2 programs an SM as quant_fp8's w128 launch); "tile": every call through
# fp8_block_many_kernel (8 warps, 2 programs an SM), as before session 46
CONFIG = {"num_warps": 8, "PROGS_PER_SM": 2, "TABLES_CACHED": 16, "KERNEL": "reg",
          "num_warps_reg": 4, "PROGS_PER_SM_reg": 2}
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
def aligned_tile(x0_ptr, x0_addr, tab_ptr, tile_ptr, t, X_BYTES: tl.constexpr, BR: tl.constexpr,
                 S_MULT: tl.constexpr, BC: tl.constexpr = 128, DIM: tl.constexpr = 128):
    """Tile ``t`` of the tables as :func:`table_tile`, for inputs the launch checked: 16-byte
    aligned, rows and columns multiples of ``DIM`` (whole 128×128 tiles by default), walked
    in ``[BR, BC]`` steps, scale offsets multiples of ``S_MULT``. Returns ``(i, x_ptr, rows,
    cols, q_off, s_off, r0, c0)``, the values stated multiples of what the launch checked
    and the input addressed at ``x0_ptr`` (the first tensor, ``x0_addr`` its address) plus
    its own address's distance from it in elements, so loads and stores vectorize (an
    address cast from the table's integer carries no alignment)."""
    i = tl.load(tile_ptr + 3 * t)
    r0 = tl.multiple_of(tl.load(tile_ptr + 3 * t + 1), BR)
    c0 = tl.multiple_of(tl.load(tile_ptr + 3 * t + 2), BC)
    x_ptr = x0_ptr + tl.multiple_of((tl.load(tab_ptr + 5 * i) - x0_addr) // X_BYTES, 4)
    rows = tl.multiple_of(tl.load(tab_ptr + 5 * i + 1).to(tl.int32), DIM)
    cols = tl.multiple_of(tl.load(tab_ptr + 5 * i + 2).to(tl.int32), DIM)
    q_off = tl.multiple_of(tl.load(tab_ptr + 5 * i + 3), DIM * DIM)
    s_off = tl.load(tab_ptr + 5 * i + 4)
    if S_MULT > 1:
        s_off = tl.multiple_of(s_off, S_MULT)
    return i, x_ptr, rows, cols, q_off, s_off, r0, c0


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


@triton.jit
def fp8_w128_many_kernel(x0_ptr, x0_addr, tab_ptr, tile_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr,
                         amax_ptr, n_tiles, FP8_EXP: tl.constexpr, IN_EXP: tl.constexpr,
                         E5M2: tl.constexpr, NAN_SEL: tl.constexpr, IN_DTYPE: tl.constexpr,
                         X_BYTES: tl.constexpr):
    """128×128 tiles of many tensors, power-of-two scales: the register pair kernel's ``TILE``
    arithmetic (each element's scale the tile's, written as the 1x128 views' row and column
    maxima raised to the tile max, both views converted from x), W's codes row-major, Wᵀ's
    as words of 4 rows, the scales ``[rows/128, cols/128]`` / ``[cols/128, rows/128]``, each
    tensor's amax by atomic max. The tables read by :func:`aligned_tile`."""
    G: tl.constexpr = 4
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        i, x_ptr, rows, cols, q_off, s_off, r0, c0 = aligned_tile(
            x0_ptr, x0_addr, tab_ptr, tile_ptr, t, X_BYTES, 128, 1)
        x, nan, offs = _load_tile(x_ptr, r0, c0, cols, G, None, 0, IN_DTYPE)
        a = tl.abs(x)
        rmax = tl.max(a, axis=2)                                  # [NI, G]
        cmax = tl.max(tl.max(a, axis=1), axis=0)                  # [128]
        tmax = tl.max(cmax, axis=0)
        rmax = tl.maximum(rmax, tmax)
        cmax = tl.maximum(cmax, tmax)
        _, tinv = pow2_scale(tmax, FP8_EXP, IN_EXP)
        rscale, _ = pow2_scale(rmax, FP8_EXP, IN_EXP)
        tl.store(qr_ptr + q_off + offs, fp8_byte(x * rscale[:, :, None], E5M2, nan, NAN_SEL))
        tl.store(sr_ptr + s_off + (r0 // 128) * (cols // 128) + c0 // 128, tinv)
        cscale, _ = pow2_scale(cmax, FP8_EXP, IN_EXP)
        qcol = fp8_byte(x * cscale[None, None, :], E5M2, nan, NAN_SEL)
        _store_col_words(qc_ptr + q_off, qcol, r0, c0, rows, G)
        tl.store(sc_ptr + s_off + (c0 // 128) * (rows // 128) + r0 // 128, tinv)
        # relaxed: read only after the kernel, no fence a tile
        tl.atomic_max(amax_ptr + i, tmax, sem="relaxed")


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


_REG = "the register pair kernel's 128x128 tile"


def _not_reg(xs: list[torch.Tensor], pow2: bool) -> str | None:
    """Why a call runs the old tile code (``_quant_128x128``, ~3.5x slower at 125m and 1b)
    instead of the register tile; None when it does not (``ms.explain()`` says which)."""
    if CONFIG["KERNEL"] != "reg":
        return f"the 128x128 tile code: quant_many.CONFIG['KERNEL'] = {CONFIG['KERNEL']!r}"
    if not pow2:
        return "the 128x128 tile code: the register tile takes power-of-two scales only"
    if any(x.data_ptr() % 16 for x in xs):
        return "the 128x128 tile code: an input not 16-byte aligned"
    return None


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
    why = _not_reg(xs, pow2)
    note_path("quantize_rowcol_many", "fp8_block|fp8_block",
              f"triton (one launch, {_REG})" if why is None else f"triton (one launch, {why})")
    if why is None:
        x0, fp8_max = xs[0], FP8_MAX_OF[fp8_dtype]
        exp, in_exp = pow2_exponents(fp8_max, _IN_MAX[IN_DTYPE_CODE[x0.dtype]])
        grid = (persistent_grid(n_tiles, dev, CONFIG["PROGS_PER_SM_reg"]),)
        fp8_w128_many_kernel[grid](x0, x0.data_ptr(), tab, tiles, qr.view(torch.uint8), sr,
                                   qc.view(torch.uint8), sc, amax, n_tiles, exp, in_exp,
                                   fp8_dtype == torch.float8_e5m2, FP8_CONFIG["NAN_SEL"],
                                   IN_DTYPE_CODE[x0.dtype], x0.element_size(),
                                   num_warps=CONFIG["num_warps_reg"])
        return [qr, sr, qc, sc, amax]
    grid = (persistent_grid(n_tiles, dev, CONFIG["PROGS_PER_SM"]),)
    fp8_block_many_kernel[grid](tab, tiles, qr.view(torch.uint8), sr, qc.view(torch.uint8), sc,
                                amax, n_tiles, IN_DTYPE_CODE[xs[0].dtype],
                                FP8_MAX_OF[fp8_dtype],
                                _IN_MAX[IN_DTYPE_CODE[xs[0].dtype]], pow2,
                                fp8_dtype == torch.float8_e5m2, num_warps=CONFIG["num_warps"])
    return [qr, sr, qc, sc, amax]


register_kernel("quantize_rowcol_many", "fp8_block|fp8_block")(
    quantize_rowcol_many_fp8_block_triton)
