"""Fused FP8 blockwise quantization kernels (SPEC §8), bit-exact with ``quant.fp8``.

One launch. A program loads a ``[BR, BC]`` tile of x once and writes:

* ``block=(1, 128)`` row view: one scale per 128 consecutive elements of a row
  (``scale_inv`` fp32 ``[rows, cols/128]``);
* ``block=(1, 128)`` column view (``quantize_rowcol`` only): the same rule on ``xᵀ``, i.e. per
  128 consecutive *rows* of a column, written as ``data[cols, rows]`` and
  ``scale_inv[cols, rows/128]`` -- the DeepSeek-V3 activation/gradient pair for wgrad;
* ``block=(128, 128)`` (weights): one scale per tile (``scale_inv[rows/128, cols/128]``).

The kernels (the tile code, the scale rule operation by operation, NaN and Inf, the amax) are
in :mod:`.quant_fp8_kernels`; this module holds ``CONFIG`` (which kernel runs a 1x128 pair, its
tiles and launch), the launches and the registered twins of the reference quantizers.
"""

from __future__ import annotations

import os

import torch

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..op_specs import PROLOGUES
from ..quant.common import check_input
# FP8_MAX_OF, not FP8_MAX: the kernels take a parameter of that name
from ..quant.fp8 import FP8_MAX as FP8_MAX_OF
from ..tensor import QFormat, QuantizedTensor
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_views, persistent_grid,
                     take_prologue)
# the kernels (the tile functions re-exported too: quant_many, quant_fp8_tensor import them here)
from .quant_fp8_kernels import (  # noqa: F401
    _fp8_block_kernel,
    _fp8_byte,
    _fp8_rowcol_sub_kernel,
    _quant_1x128,
    _quant_128x1,
    _quant_128x128,
    _scale_from_vmax,
)
from .quant_rowcol_reg import fp8_rowcol_reg_kernel, pow2_exponents

__all__ = ["quantize_fp8_block_triton", "quantize_rowcol_fp8_block_triton", "pair_gathered",
           "weight_pairs_experts", "CONFIG"]

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
          # NUM_STAGES_reg 2: the tile loop software-pipelined, the next tile's loads issued
          # as cp.async into shared memory while this one is quantized (offline SASS, Triton
          # 3.6: registers level, 16 -> 48 KB of shared memory, 80 KB for fp32 weights; 3
          # stages spill 520 bytes a thread with relu²'s backward prologue). Session 43 (H200,
          # graph-replayed, same bits): 16384 x 768 / 2048 / 3072 / 4096 / 8192 / 14336
          # 26.9 / 56.9 / 82.0 / 105.7 / 199.5 / 345.1 -> 26.9 / 51.8 / 72.6 / 90.8 / 170.0 /
          # 288.5 µs (65% -> 78% of the copy rate at 14336); training, one process each (call
          # 4): 125m fp8_blockwise 0.904 -> 0.908x, 1b 1.183 -> 1.194x (calls 1-2: level).
          # Session 44: 3 stages (80 KB), every variant but those below without spills
          # (offline SASS); one process each, 125m fp8_blockwise 0.901 -> 0.910x, 1b 1.196
          # -> 1.206-1.208x (call 2)
          "num_warps_reg": 4, "PROGS_PER_SM_reg": 2, "NUM_STAGES_reg": 3, "NAN_SEL": False,
          # the stages where a tile stages twice the bytes (fp32 input: 144 KB of shared
          # memory at 3 stages; a two-input prologue, mul or relu²'s backward: 3 stages spill
          # 512-520 bytes a thread)
          "NUM_STAGES_reg_wide": 2,
          # the register kernel walks its tiles from the last one back, where the producer's
          # last writes may still be in L2 (session 20: 125m fp8_blockwise +1.0-1.3%, 1b
          # level)
          "REVERSE_reg": True,
          # a weight's 128x128 W + Wᵀ pair (pow2 scales, rows and cols multiples of 128): "reg"
          # (the register pair kernel with TILE: 4 rows a thread, Wᵀ's bytes joined into words
          # in-thread) or "tile" (``_fp8_block_kernel`` MODE 1: Wᵀ through a transposing
          # store, ~36% of the copy rate at 1b, session 21). Bit-identical.
          "W128": "reg", "num_warps_w128": 4, "PROGS_PER_SM_w128": 2}
_ROWCOL_MODES = ("reg", "sub", "tile")
_KEY = rowcol_key("fp8_block", "fp8_block")
# what ms.explain() says of a 1x128 pair, by the kernel that ran
_PATHS = {"reg": "triton (1x128 pair: tile in registers, quant_rowcol_reg)",
          "sub": "triton (1x128 pair: sub-tiled kernel, ROWCOL='sub')",
          "tile": "triton (1x128 pair: one-tile kernel, ROWCOL='tile')"}
_NOT_POW2 = "triton (1x128 pair: sub-tiled kernel, as the register kernel takes pow2 scales only)"

_IN_MAX = (3.4028234663852886e38, 3.3895313892515355e38, 65504.0)  # fp32, bf16, fp16
_OPTS = ("block", "pow2_scales", "fp8_dtype", "check_finite")


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


def _launch(x2, views, block, pow2, fp8_dtype, col, prologue=None):
    """views: [(data, scale_inv)] for the row view and, if ``col``, the column view;
    ``prologue`` ``(name, y)``: of ``op(x2, y)``, for the register pair kernel only."""
    rows, cols = x2.shape
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
    if prologue is not None and not (kind == "reg" and pow2):
        raise ValueError("quant_fp8._launch: a prologue needs the register pair kernel")
    if CONFIG["W128"] not in ("reg", "tile"):
        raise ValueError(f"quant_fp8.CONFIG['W128'] must be 'reg' or 'tile', got "
                         f"{CONFIG['W128']!r}")
    if mode == 1 and col and pow2 and CONFIG["W128"] == "reg" and not (rows % 128 or cols % 128):
        return _launch_reg(x2, qr, sr, qc, sc, fp8_max, fp8_dtype, tile=True)
    if kind is not None:
        path = _PATHS[kind] if pow2 or kind != "reg" else _NOT_POW2
        note_path("quantize_rowcol", _KEY, path if prologue is None else
                  f"{path[:-1]}; {prologue[0]} fused into its loads)")
    if kind == "reg" and pow2:
        return _launch_reg(x2, qr, sr, qc, sc, fp8_max, fp8_dtype, prologue=prologue)
    amax = torch.zeros((), dtype=torch.float32, device=x2.device)
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


def reg_stages(dtype: torch.dtype, prologue=None) -> int:
    """The register pair kernel's pipeline stages: ``NUM_STAGES_reg``, or
    ``NUM_STAGES_reg_wide`` where a tile stages twice the bytes (an fp32 input, or a prologue
    of two inputs), which more stages would spill or fit fewer programs an SM."""
    wide = dtype == torch.float32 or (prologue is not None and PROLOGUES[prologue[0]][1] > 1)
    return CONFIG["NUM_STAGES_reg_wide" if wide else "NUM_STAGES_reg"]


def _launch_reg(x2, qr, sr, qc, sc, fp8_max, fp8_dtype, write_row: bool = True,
                prologue=None, write_col: bool = True, tile: bool = False, seg: int = 0,
                src=None, bound: int = 0):
    """``quant_rowcol_reg``'s kernel: rows and cols are multiples of 128 (``check_views``);
    ``write_row=False``: the column view alone (``qr``/``sr`` are not written), ``write_col``
    likewise; ``prologue`` ``(name, y)``: of ``op(x2, y)``; ``tile``: a 128x128 W + Wᵀ pair
    (``seg``: x2 stacks experts of ``seg`` rows, Wᵀ ``[E, cols, seg]``; 0: one matrix);
    ``src``: x2's rows gathered into a padded layout of ``bound`` rows (``GATHER``). Returns
    the amax (a zeroed fp32 scalar the programs raise by ``atomic_max``)."""
    rows, cols = (bound, x2.shape[1]) if src is not None else x2.shape
    n_tc, n_tiles = cols // 128, (rows // 128) * (cols // 128)
    exp, in_exp = pow2_exponents(fp8_max, _IN_MAX[IN_DTYPE_CODE[x2.dtype]])
    progs, warps = (CONFIG["PROGS_PER_SM_w128"], CONFIG["num_warps_w128"]) if tile else \
        (CONFIG["PROGS_PER_SM_reg"], CONFIG["num_warps_reg"])
    grid = (persistent_grid(n_tiles, x2.device, progs),)
    pro, y = (0, None) if prologue is None else (PROLOGUES[prologue[0]][2], prologue[1])
    amax = torch.zeros((), dtype=torch.float32, device=x2.device)
    fp8_rowcol_reg_kernel[grid](x2, amax, qr.view(torch.uint8), sr, qc.view(torch.uint8), sc,
                                rows, cols, n_tc, n_tiles, *sr.stride(), *sc.stride()[-2:], exp,
                                in_exp, fp8_dtype == torch.float8_e5m2, CONFIG["NAN_SEL"],
                                reg_stages(x2.dtype, prologue), write_row, x2 if y is None else y,
                                pro, IN_DTYPE_CODE[x2.dtype], write_col, CONFIG["REVERSE_reg"],
                                tile, src, src is not None, seg or rows,
                                sc.stride(0) if sc.dim() == 3 else 0, num_warps=warps)
    return amax


def pair_gathered(x: torch.Tensor, src: torch.Tensor, bound: int, row_opts: dict,
                  col_opts: dict):
    """FP8 1x128 row and column views of a grouped token matrix ``x [T, K]`` in its padded
    layout ``[bound, K]`` (``pad_grouped.source_rows``: ``src[p]`` the token row of padded row
    p, -1 for a zero row), read straight from x: ``((qr [T, K], sr [T, K/128]), (qc [K,
    bound], sc [K, bound/128]))``, scales row-major (the grouped op's layout), bit for bit the
    padded copy's pair with its row view gathered back at the token rows, without writing
    the copy or gathering (``GATHER`` in ``quant_rowcol_reg``). Register-kernel views only
    (power-of-two scales, the same options both ways, K and bound multiples of 128), else
    :class:`KernelUnsupported`."""
    parsed = [_options(o) for o in (row_opts, col_opts)]
    block, pow2, fp8_dtype = parsed[0]
    T, K = x.shape
    if parsed[0] != parsed[1] or block != (1, 128) or not pow2 or _rowcol_mode() != "reg" \
            or K % 128 or bound % 128 or src.shape != (bound,) or bound * K >= 2 ** 31:
        raise KernelUnsupported("a gathered FP8 pair needs the register kernel's 1x128 views")
    check_kernel_input(x)
    dev = x.device
    qr = torch.empty((T, K), dtype=fp8_dtype, device=dev)
    sr = torch.empty((T, K // 128), dtype=torch.float32, device=dev)
    qc = torch.empty((K, bound), dtype=fp8_dtype, device=dev)
    sc = torch.empty((K, bound // 128), dtype=torch.float32, device=dev)
    _launch_reg(x, qr, sr, qc, sc, FP8_MAX_OF[fp8_dtype], fp8_dtype, src=src, bound=bound)
    return (qr, sr), (qc, sc)


def weight_pairs_experts(w2: torch.Tensor, n_experts: int, opts: dict):
    """FP8 128x128 views of stacked expert weights ``w2 [E·N, K]`` (expert e's ``[N, K]`` at
    rows ``e·N``): ``((qw [E·N, K], sw [E·N/128, K/128]), (qt [E, K, N], st [E, K/128,
    N/128]))``, W and every expert's exact transpose (SPEC §8) from one read of the master
    weights (the register pair kernel's ``TILE`` path, Wᵀ written per expert), bit for bit
    W's 128x128 quantization and its tiles transposed. Power-of-two scales, N and K multiples
    of 128, the register kernel on (``CONFIG["W128"]``), else :class:`KernelUnsupported`."""
    block, pow2, fp8_dtype = _options(opts)
    rows, cols = w2.shape
    n = rows // max(n_experts, 1)
    if block != (128, 128) or not pow2 or CONFIG["W128"] != "reg" or n * n_experts != rows \
            or n % 128 or cols % 128 or rows == 0:
        raise KernelUnsupported("stacked 128x128 expert weight pairs need the register kernel")
    check_kernel_input(w2)
    dev = w2.device
    qw, sw = _buffers(rows, cols, block, fp8_dtype, dev)
    qt = torch.empty((n_experts, cols, n), dtype=fp8_dtype, device=dev)
    st = torch.empty((n_experts, cols // 128, n // 128), dtype=torch.float32, device=dev)
    _launch_reg(w2, qw, sw, qt, st, FP8_MAX_OF[fp8_dtype], fp8_dtype, tile=True, seg=n)
    return (qw, sw), (qt, st)


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
    fused into the register kernel's loads (a 1x128 row view, column view or both), applied
    first otherwise."""
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
    x2, prologue = take_prologue(x2, prologue, reg)     # fused: in the register kernel
    if row and col:
        # the register kernel writes the 1x128 scales straight into the op's layout
        cm = block == (1, 128) and pow2 and _rowcol_mode() == "reg"
        views = [_buffers(rows, cols, block, fp8_dtype, x.device, cm),
                 _buffers(cols, rows, block, fp8_dtype, x.device, cm)]
        amax = _launch(x2, views, block, pow2, fp8_dtype, col=True, prologue=prologue)
        return (_result(*views[0], amax, torch.Size((rows, cols)), x.dtype, block, pow2),
                _result(*views[1], amax, torch.Size((cols, rows)), x.dtype, block, pow2))
    if row and reg:
        # a row view alone (e.g. fprop's x when backward recomputes xᵀ): the register kernel,
        # columns unwritten, the scales straight into the op's layout
        note_path("quantize_rowcol", "fp8_block|none", "triton (1x128 row view alone: tile in "
                  "registers, quant_rowcol_reg" + (f"; {prologue[0]} fused into its loads)"
                                                   if prologue else ")"))
        view = _buffers(rows, cols, block, fp8_dtype, x.device, col_major=True)
        amax = _launch_reg(x2, *view, *view, FP8_MAX_OF[fp8_dtype], fp8_dtype, write_col=False,
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
        amax = _launch_reg(x2, view[0], view[1], *view, FP8_MAX_OF[fp8_dtype], fp8_dtype,
                           write_row=False, prologue=prologue)
        return None, _result(*view, amax, torch.Size((cols, rows)), x.dtype, block, pow2)
    x_t = x2.t().contiguous()   # a column view alone: the row kernel on the transpose
    view = _buffers(cols, rows, block, fp8_dtype, x.device)
    amax = _launch(x_t, [view], block, pow2, fp8_dtype, col=False)
    return None, _result(*view, amax, torch.Size((cols, rows)), x.dtype, block, pow2)


quantize_rowcol_fp8_block_triton.hints = ("prologue",)

for _key in ("fp8_block|fp8_block", "fp8_block|none", "none|fp8_block"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_fp8_block_triton)
