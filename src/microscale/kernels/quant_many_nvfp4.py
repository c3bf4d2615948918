"""Many NVFP4 weights in two launches: every 16×16-tiled W of a model, once a step.

An NVFP4 layer's weight is quantized with 16×16 tiles (SPEC §3), so the quantized Wᵀ that
dgrad reads is the transpose of the quantized W, and on Hopper both GEMMs read W as the bf16
matrix ``value · tile_scale`` ("expanded", ``tensor.py``): one view, written once
(``nn.function.one_weight_view``). Per weight that is two launches (the global amax, then the
quantize pass) of a few µs of bytes each; at 125m (17 quantized blocks, 102 weights) the
weights took ~1.1 ms of an H100 step, mostly launch and tail (session 25 profile). Here:

* ``nvfp4_2d_many_amax_kernel`` walks the ``[BR, BC]`` tiles of *all* the weights (the tile
  and tensor tables of ``quant_many``) and takes each tensor's global amax by atomic max into
  ``amax[i]`` (``max |x|``, NaN read as 0, as every NVFP4 amax pass);
* ``nvfp4_2d_many_kernel`` walks the same tiles again: each tensor's global scales from its
  amax, then ``quant_nvfp4_rows.quantize_rows``, the per-tensor rows pass's own tile code
  (16×16 tile maxima, E4M3 scale bytes, E2M1 values), written expanded at the tensor's
  offset in one flat bf16 buffer, its scale bytes ``[rows, cols/16]`` (each tile's byte on
  its 16 rows) at its offset in one flat byte buffer, and Wᵀ's ``[cols, rows/16]`` at the
  same offset in another (dgrad's view is the transpose of W's: no launch a weight for it).

So each tensor's bytes are those of ``quantize_rowcol(W, nvfp4 2D expanded, None)``, and
Wᵀ's scale bytes those of ``tensor.transpose_tile_scales``, tested against them and the
reference. Rows and columns must be multiples of 16 (whole tiles).

Measured (H100, session 26, a 125m step profiled): the two launches take 0.67 ms for the 102
weights (fp32 masters: ~1.5 TB/s) against 1.0 ms one by one. The step did not gain (0.5%
slower, twice), so the harness groups NVFP4 weights only where ``ms.weight_cache`` is on for
gradient accumulation (``nn.weight_cache.CONFIG["GROUP_FORMATS"]``). Those kernels addressed
each tile from the table's integer (no vectorized loads) and the amax pass raised ``amax[i]``
by an acq_rel atomic a tile. Aligned (session 55, ``CONFIG["ALIGNED"]``; H200,
``bench_many.py --fmt nvfp4``, the 1b weight set graph-replayed, 8 programs an SM): 2.98 ms
against 5.67 ms, and 3.33 ms one launch pair per weight; the 1b step level with per-layer
weights (0.9029 / 0.8969 against 0.8993 / 0.9068 / 0.9000 of bf16, one process), 125m +0.1%
(0.7843 / 0.7846 against 0.7830 / 0.7833). With Wᵀ's scale bytes written here too (session
56: 125m's fill 0.36 ms), 125m read +0.9% grouped (0.7958 against 0.7885 of bf16, three rows
each, alternated), so the harness now groups small NVFP4 weights as it does FP8 and MXFP8.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, register_kernel
from ..ops_many import flat_offsets
from ..tensor import QFormat, transpose_tile_scales
from ._utils import IN_DTYPE_CODE, abs_nan0, nvfp4_global_scales, persistent_grid
from .quant_many import aligned_tile, check_inputs, table_tile, tables
from .quant_nvfp4_rows import quantize_rows

__all__ = ["quantize_rowcol_many_nvfp4_triton", "CONFIG"]

# [BR, BC] tiles, as the per-tensor rows pass's BR x BC = 32 x 32 but twice as wide (fp32
# masters: 8 KB a tile). ALIGNED: inputs addressed from the first tensor's pointer, the tables'
# values stated multiples (quant_many.aligned_tile's lesson: an address cast from the table's
# integer carries no alignment, so its loads do not vectorize), and the amax pass's atomics
# relaxed, one per program and tensor (its walk in contiguous runs of tiles), not one per tile
# with a fence; False: the session 26 kernels (table addresses, an acq_rel atomic a tile).
# PROGS_PER_SM 16 (session 55 sweep, H200, aligned): 2.80 ms for the 1b weights against 2.98 at
# 8 and 4.04 at 4; 125m 0.63 / 0.65 / 0.80 ms; 8 warps slower at each.
# T_SCALES_MAX_BYTES: Wᵀ's scale bytes written by the kernel up to this many in all. They land
# two bytes a row a tile, scattered, merged in L2 while the buffer fits it: session 55 call 6
# (H200), 125m's 7.9 MB 0.63 → 0.36 ms for the two launches (no transpose a weight after
# them), 1b's 55 MB 2.80 → 3.05 ms. Above it each weight's are copied after the launch
# (session 56 call 1: 1b 2.79 ms that way, 125m 0.36 ms in the kernel; GPU tests of both).
CONFIG = {"BR": 32, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 16, "ALIGNED": True,
          "T_SCALES_MAX_BYTES": 16 << 20}


@triton.jit
def _tile(x0_ptr, x0_addr, tab_ptr, tile_ptr, t, IN_DTYPE: tl.constexpr, X_BYTES: tl.constexpr,
          BR: tl.constexpr, BC: tl.constexpr, ALIGNED: tl.constexpr):
    """Tile ``t``: ``(i, x_ptr, rows, cols, q_off, s_off, c0, offs_r, offs_c)``. ``ALIGNED``
    (inputs 16-byte aligned, the launch checked): ``quant_many.aligned_tile`` with rows and
    columns multiples of 16 (the flat offsets of values and scale bytes then multiples of 256
    and 16), so that loads and stores vectorize."""
    if ALIGNED:
        i, x_ptr, rows, cols, q_off, s_off, r0, c0 = aligned_tile(
            x0_ptr, x0_addr, tab_ptr, tile_ptr, t, X_BYTES, BR, 16, BC, 16)
        offs_r, offs_c = r0 + tl.arange(0, BR), c0 + tl.arange(0, BC)
    else:
        i, x_ptr, rows, cols, q_off, s_off, _, c0, offs_r, offs_c = table_tile(
            tab_ptr, tile_ptr, t, IN_DTYPE, BR, BC)
    return i, x_ptr, rows, cols, q_off, s_off, c0, offs_r, offs_c


@triton.jit
def nvfp4_2d_many_amax_kernel(x0_ptr, x0_addr, tab_ptr, tile_ptr, amax_ptr, n_tiles,
                              IN_DTYPE: tl.constexpr, X_BYTES: tl.constexpr, BR: tl.constexpr,
                              BC: tl.constexpr, ALIGNED: tl.constexpr):
    """``amax[i] = max |x_i|`` (NaN read as 0) over the tiles of every tensor; ``amax``
    zeroed before. ``ALIGNED``: each program walks a contiguous run of tiles, keeps the
    running maximum of the tensor it is in and raises ``amax[i]`` (relaxed: read only after
    the kernel) when it leaves it; else an atomic a tile, as session 26's kernel."""
    if ALIGNED:
        per = tl.cdiv(n_tiles, tl.num_programs(0))
        start = tl.program_id(0) * per
        stop = tl.minimum(start + per, n_tiles)
        step = 1
    else:
        start, stop, step = tl.program_id(0), n_tiles, tl.num_programs(0)
    cur = tl.full((), -1, tl.int32)
    run = tl.zeros((), tl.float32)
    for t in tl.range(start, stop, step):
        i, x_ptr, rows, cols, _, _, _, offs_r, offs_c = _tile(
            x0_ptr, x0_addr, tab_ptr, tile_ptr, t, IN_DTYPE, X_BYTES, BR, BC, ALIGNED)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
        m = tl.max(tl.max(abs_nan0(x.to(tl.float32)), axis=1), axis=0)
        if ALIGNED:
            left = i != cur
            tl.atomic_max(amax_ptr + cur, run, mask=left & (cur >= 0), sem="relaxed")
            run = tl.where(left, m, tl.maximum(run, m))
            cur = i
        else:
            tl.atomic_max(amax_ptr + i, m)
    if ALIGNED:
        tl.atomic_max(amax_ptr + cur, run, mask=cur >= 0, sem="relaxed")


@triton.jit
def nvfp4_2d_many_kernel(x0_ptr, x0_addr, tab_ptr, tile_ptr, amax_ptr, q_ptr, s_ptr, st_ptr,
                         n_tiles, IN_DTYPE: tl.constexpr, X_BYTES: tl.constexpr,
                         BR: tl.constexpr, BC: tl.constexpr, ALIGNED: tl.constexpr,
                         WRITE_T: tl.constexpr):
    """Each tensor's 16×16-tiled NVFP4 view, expanded (bf16 ``value · tile_scale``), with the
    global scales of ``amax[i]``; its scale bytes and (``WRITE_T``) those of its transpose
    (``st_ptr``, at the same flat offsets: Wᵀ's view is W's transposed, SPEC §3)."""
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        i, x_ptr, rows, cols, q_off, s_off, c0, offs_r, offs_c = _tile(
            x0_ptr, x0_addr, tab_ptr, tile_ptr, t, IN_DTYPE, X_BYTES, BR, BC, ALIGNED)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_c[None, :], mask=mask, other=0.0)
        s_enc6, s_dec = nvfp4_global_scales(amax_ptr + i)
        quantize_rows(x.to(tl.float32), s_enc6, s_dec, amax_ptr, 0, q_ptr + q_off, s_ptr + s_off,
                      amax_ptr, offs_r, c0, rows, cols, IN_DTYPE, BR, BC, False, True, 0, True,
                      st_ptr + s_off if WRITE_T else None)


def _check(xs: list[torch.Tensor], row, col) -> None:
    if not xs:
        raise KernelUnsupported("no tensors")
    if row is None or col is not None:
        raise KernelUnsupported("one view (W; Wᵀ is its transpose)")
    fmt, opts = row
    if fmt != QFormat.NVFP4 or not opts.get("block_2d") or not opts.get("expand") \
            or opts.get("rht") or opts.get("stochastic") or opts.get("amax") is not None:
        raise KernelUnsupported("NVFP4 16x16 tiles, round-to-nearest, expanded, amax measured")
    check_inputs(xs, 16)


def quantize_rowcol_many_nvfp4_triton(xs: list[torch.Tensor], row, col) -> list[torch.Tensor]:
    """Kernel twin of ``ops_many.rowcol_many_reference`` for NVFP4 16×16 weights: the flat
    outputs ``[expanded W (bf16), scale bytes, (empty), Wᵀ's scale bytes, amax]``."""
    _check(xs, row, col)
    _, s_offs, nq, ns = flat_offsets([x.shape for x in xs], (1, 16))
    dev = xs[0].device
    br, bc = CONFIG["BR"], CONFIG["BC"]
    tab, tiles = tables(xs, (br, bc), (1, 16))
    q = torch.empty(nq, dtype=torch.bfloat16, device=dev)
    s, s_t = (torch.empty(ns, dtype=torch.float8_e4m3fn, device=dev) for _ in range(2))
    amax = torch.zeros(len(xs), dtype=torch.float32, device=dev)
    n_tiles = tiles.shape[0]
    grid = (persistent_grid(n_tiles, dev, CONFIG["PROGS_PER_SM"]),)
    x0 = xs[0]
    aligned = CONFIG["ALIGNED"] and all(x.data_ptr() % 16 == 0 for x in xs)
    args = (IN_DTYPE_CODE[x0.dtype], x0.element_size(), br, bc, aligned)
    nvfp4_2d_many_amax_kernel[grid](x0, x0.data_ptr(), tab, tiles, amax, n_tiles, *args,
                                    num_warps=CONFIG["num_warps"])
    write_t = ns <= CONFIG["T_SCALES_MAX_BYTES"]
    nvfp4_2d_many_kernel[grid](x0, x0.data_ptr(), tab, tiles, amax, q, s.view(torch.uint8),
                               s_t.view(torch.uint8), n_tiles, *args, write_t,
                               num_warps=CONFIG["num_warps"])
    if not write_t:
        _transpose_scales_into(s_t, s, [x.shape for x in xs], s_offs)
    return [q, s, q.new_empty(0, dtype=torch.uint8), s_t, amax]


def _transpose_scales_into(s_t: torch.Tensor, s: torch.Tensor, shapes, s_offs) -> None:
    """Each weight's transposed tile scale bytes (``tensor.transpose_tile_scales``) copied
    from ``s`` into ``s_t`` at its flat offset (``s_offs``): one copy a weight."""
    for (rows, cols), at in zip(shapes, s_offs):
        n = rows * (cols // 16)
        transpose_tile_scales(s[at:at + n].view(rows, cols // 16), 16,
                              out=s_t[at:at + n].view(cols, rows // 16))


register_kernel("quantize_rowcol_many", "nvfp4|none")(quantize_rowcol_many_nvfp4_triton)
