"""Fused MX quantization kernels (MXFP8 E4M3/E5M2, MXFP4), bit-exact with ``quant.mx``.

MX needs no tensor-wide scale, so one launch does everything: a program loops over
``[BR, BC]`` tiles of x and writes the row view (blocks of 32 along x's columns), the column
view (blocks of 32 along x's rows, i.e. the quantized ``xᵀ`` that wgrad reads) or both, and
folds the block maxima into the returned amax with one atomic max per program. The per-tile
views are in ``quant_mx_views``; an MXFP4 column view holds each 32-row block in one thread
(``quant_mx_col``, ``CONFIG['COL_REG']``); MXFP8 pairs of whole 128-tiles go to
``quant_rowcol_reg``'s kernel.

Per block of 32 with ``vmax = max|v|`` (SPEC §7), all integer work on the fp32 bits::

    k0   = floor(log2 vmax) - emax            (exponent field; subnormals normalised first)
    ceil : k = k0 + (significand(vmax) > elem_max / 2^emax)   (1.75 for FP8, 1.5 for E2M1)
    floor: k = k0;  then k clamped to [-127, 127], vmax = 0 -> byte 0
    scale byte = k + 127;  elements = cast_rne_satfinite(v * 2^-k)

Non-finite input (``check_finite=False``) as ``quant.mx``: a NaN is read as 0 and stored as the
FP8 NaN byte 0x7F (MXFP8) or as its block's scale byte 0xFF (MXFP4); a block whose max is Inf
gets k = 0 and its Inf saturates to ±elem_max.

MXFP4 may rotate 32-chunks first (``rht=True``; the rotated values are rounded to the input
dtype, as ``hadamard.rht`` does) and may round stochastically (``rand_bits`` or in-kernel
Philox), exactly as NVFP4 does. Bytes per element for bf16 x: 2 read; 1.03 (MXFP8) or
0.53 (MXFP4) written per view.

An MXFP4 view may be written *expanded* (``ROW_EXP`` / ``COL_EXP``; ``tensor.py``): bf16
``value(code) · 2^k`` instead of the packed codes, what the bf16-emulated GEMM would decode them
to (``kernels/gemm_fp4``), so an operand consumed at once skips the dequantize pass. The product
is formed in fp32 as ``QuantizedTensor.block_values`` forms it (``2^-127`` is an fp32
subnormal, exact) and is a bf16 number whenever it is finite (a code has two significant bits,
and ``k ≥ -127`` keeps it above bf16's smallest subnormal); a block of ``vmax`` near bf16's
maximum overflows to ±Inf exactly as the dequantize pass does, and a NaN block (scale byte 0xFF)
expands to NaN. 2 bytes written per element instead of 0.53.

An MXFP8 view is written expanded by the register pair kernel (``quant_rowcol_reg``, shapes
that tile by 128) when asked: bf16 RNE of ``value(byte) · 2^k`` (``mx8_expanded``), what
``QuantizedTensor.expand`` gives; other MXFP8 calls write codes, which the op decodes.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..op_specs import PROLOGUES
from ..quant.common import check_input
from ..tensor import QFormat, QuantizedTensor
from .quant_mx_col import RHT_SIGN_MASK_32, mx4_col_view_reg
from .quant_rowcol_reg import mx8_rowcol_reg_kernel
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_rand_bits, check_views,
                     kernel_seed, persistent_grid, rht_matrix_on, take_prologue, tile_coords)
from .quant_mx_views import mx_col_view, mx_row_view

__all__ = ["KERNELS", "quantize_rowcol_mx_triton", "CONFIG"]

# PACK_COL: the MXFP8 column view stored as packed uint32 words (bit-identical); off until an
# H200 sweep (bench_quant.py --sweep) has timed it against the byte stores (H100, session 6:
# slower, 88.8 vs 52.2 µs at 16384x768). ROWCOL "reg" (the default): an MXFP8 row + column pair
# on shapes that tile by 128 runs ``quant_rowcol_reg``'s kernel (the tile in registers, see
# there; H100, 16384x768 / 16384x3072: 36.4 / 108.8 µs against 52.2 / 163.1 µs here); "mx"
# keeps this module's kernel for every pair. MICROSCALE_MX_ROWCOL overrides. EXPAND: views
# the layer asks for expanded are written so by the kernel (MXFP4: every MX kernel; MXFP8: the
# register pair kernel; False: codes, which the op then decodes in a pass of its own).
# COL_REG: MXFP4 column views with a 32-row block in one thread (quant_mx_col; interpreter-
# tested, not yet timed on a GPU).
CONFIG = {"BR": 32, "BC": 128, "num_warps": 4, "PROGS_PER_SM": 8, "NUM_STAGES": 2,
          "PACK_COL": False, "ROWCOL": os.environ.get("MICROSCALE_MX_ROWCOL", "reg"),
          # BR_reg: the register pair kernel's tile rows (32, 64 or 128; columns 128): fewer
          # rows hold fewer values a thread (offline SASS, Triton 3.6: 248-255 registers at
          # 128 rows and 4 warps, 164-168 at 64 rows and 4 warps or 32 rows and 2), so more
          # programs fit an SM. Session 21 (H100, call 7): [32, 128] with 2 warps and 6
          # programs an SM ran the layer's pairs (x: row view expanded; dy: both) at 16384 x
          # 3072 in 126.5 / 149.4 µs against 147.7 / 168.9 at [128, 128], 4 warps, 2; 125m
          # mxfp8 0.742x -> 0.768x of bf16 (same process). [64, 128] with 2 warps gave the x
          # pair other bits than the reference's on the H100 (not understood; refused below).
          "BR_reg": 32,
          # BC_reg: its tile columns (128, or 64: with one warp a [32, 64] tile keeps each
          # column block's 32 rows inside the warp, so its maxima need no shared memory and
          # no barrier across warps: offline 12 -> 3 BAR.SYNC, 0.742 -> 0.699 warp
          # instructions an element). Session 43 (H200, call 7, 16384x3072, µs): x pair 97.3
          # -> 101.9-105.8 at 10-16 programs an SM, dy 115.5 -> 118.4-140.4; 125m mxfp8 0.829
          # -> 0.827x. Same bits; 128 stays.
          "BC_reg": 128,
          # NUM_STAGES_reg 2 (the tile loop software-pipelined through shared memory, as
          # quant_fp8's since session 43) ran level here: x pair 97.3-98.3 -> 98.7 µs at
          # 16384x3072 (H200, session 43); this kernel is not waiting on its loads alone.
          # Session 44, tried and removed: the scale bytes stored as words (a row's 4 bytes
          # of a tile, a column's 4 bytes of 4 row tiles run one after another: 4x fewer
          # partial-sector stores; 128 -> 168 registers). H200, 16384x3072: x pair 98.0 ->
          # 98.2 µs, dy 116.5 -> 113.8; 125m mxfp8 0.824x -> 0.803x, rows alone 0.818x.
          "num_warps_reg": 2, "PROGS_PER_SM_reg": 6, "NUM_STAGES_reg": 1, "NAN_SEL": False,
          "EXPAND": True, "COL_REG": True,
          # the register pair kernel walks its tiles from the last one back, where the
          # producer's last writes may still be in L2 (session 20: 125m mxfp8 +1.2%, 1b level)
          "REVERSE_reg": True}

_ELEM = {QFormat.MXFP8_E4M3: 0, QFormat.MXFP8_E5M2: 1, QFormat.MXFP4: 2}
_EMAX = (8, 15, 2)
_OPTS = ("scale_rounding", "rht", "rht_d", "stochastic", "generator", "seed", "rand_bits",
         "check_finite")


@triton.jit
def _mx_kernel(x_ptr, amax_ptr, seed_ptr, rows, cols, n_tc, n_tiles,
               mr_ptr, br_ptr, qr_ptr, sr_ptr, mc_ptr, bc_ptr, qc_ptr, sc_ptr,
               IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
               ROW: tl.constexpr, ROW_ELEM: tl.constexpr, ROW_CEIL: tl.constexpr,
               ROW_RHT_D: tl.constexpr, ROW_SR: tl.constexpr,
               COL: tl.constexpr, COL_ELEM: tl.constexpr, COL_CEIL: tl.constexpr,
               COL_RHT_D: tl.constexpr, COL_SR: tl.constexpr, NUM_STAGES: tl.constexpr,
               PACK_COL: tl.constexpr, ROW_EXP: tl.constexpr = False,
               COL_EXP: tl.constexpr = False, COL_REG: tl.constexpr = False,
               SIGNS: tl.constexpr = 0):
    """Each program loops over tiles keeping elementwise maxima of the block maxima; one
    reduction and one atomic max per view and program at the end. ROW_EXP / COL_EXP: that
    MXFP4 view written expanded (bf16). COL_REG: an MXFP4 column view with a block in one
    thread (``quant_mx_col``; SIGNS: its d = 32 RHT sign mask)."""
    acc_r = tl.zeros((BR, BC // 32), dtype=tl.float32)
    acc_c = tl.zeros((BR // 32, BC), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        if ROW:
            acc_r = tl.maximum(acc_r, mx_row_view(
                x_ptr, mr_ptr, seed_ptr, br_ptr, qr_ptr, sr_ptr, r0, c0, rows, cols,
                IN_DTYPE, BR, BC, ROW_ELEM, ROW_CEIL, ROW_RHT_D, ROW_SR, ROW_EXP))
        if COL and COL_REG:
            acc_c = tl.maximum(acc_c, mx4_col_view_reg(
                x_ptr, seed_ptr, bc_ptr, qc_ptr, sc_ptr, r0, c0, rows, cols, IN_DTYPE,
                BR // 32, BC, COL_CEIL, COL_RHT_D > 0, COL_SR, COL_EXP, SIGNS))
        elif COL:
            acc_c = tl.maximum(acc_c, mx_col_view(
                x_ptr, mc_ptr, seed_ptr, bc_ptr, qc_ptr, sc_ptr, r0, c0, rows, cols,
                IN_DTYPE, BR, BC, COL_ELEM, COL_CEIL, COL_RHT_D, COL_SR, PACK_COL,
                COL_EXP))
    if ROW:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc_r, axis=1), axis=0))
    if COL:
        tl.atomic_max(amax_ptr + 1, tl.max(tl.max(acc_c, axis=1), axis=0))


# --------------------------------------------------------------------------- host side
class _View:
    """Validated options and output buffers of one MX view of ``x2`` ([rows, cols])."""

    def __init__(self, x2: torch.Tensor, fmt: QFormat, opts: dict, transposed: bool,
                 expand: bool = False, reg_pair: bool = False):
        if fmt not in _ELEM:
            raise KernelUnsupported(f"{fmt.value} is not an MX format")
        unknown = set(opts) - set(_OPTS)
        if unknown:
            raise KernelUnsupported(f"options {sorted(unknown)}")
        self.fmt, self.opts = fmt, opts
        self.scale_rounding = opts.get("scale_rounding", "ceil")
        if self.scale_rounding not in ("ceil", "floor"):
            raise KernelUnsupported(f"scale_rounding={self.scale_rounding!r}")
        self.rht = bool(opts.get("rht", False))
        self.rht_d = int(opts.get("rht_d", 32))
        self.stochastic = bool(opts.get("stochastic", False))
        if self.stochastic and fmt != QFormat.MXFP4:
            raise KernelUnsupported("stochastic rounding is for mxfp4 only")
        if self.rht and self.rht_d not in ((32,) if transposed else (16, 32)):
            raise KernelUnsupported(f"rht_d={self.rht_d} on this view")
        rows, cols = x2.shape
        vr, vc = (cols, rows) if transposed else (rows, cols)
        self.bits = check_rand_bits(opts.get("rand_bits"), rows * cols, x2.device) \
            if self.stochastic else None
        dev = x2.device
        # MXFP4: any kernel writes it expanded; MXFP8: the register pair kernel (reg_pair)
        self.expanded = bool(expand) and (fmt == QFormat.MXFP4 or reg_pair)
        # self.out: the data as the kernel writes it (bf16, uint32 words or bytes)
        if self.expanded:
            self.data = self.out = torch.empty((vr, vc), dtype=torch.bfloat16, device=dev)
        elif fmt == QFormat.MXFP4:
            self.data = torch.empty((vr, vc // 2), dtype=torch.uint8, device=dev)
            self.out = self.data.view(torch.int32)        # the kernel writes uint32 words
        else:
            dt = torch.float8_e4m3fn if fmt == QFormat.MXFP8_E4M3 else torch.float8_e5m2
            self.data = torch.empty((vr, vc), dtype=dt, device=dev)
            self.out = self.data.view(torch.uint8)
        self.scale = torch.empty((vr, vc // 32), dtype=torch.uint8, device=dev)
        self.m = rht_matrix_on(self.rht_d, dev) if self.rht else self.scale

    @property
    def sr_mode(self) -> int:
        return 0 if not self.stochastic else (1 if self.bits is not None else 2)

    def args(self, x2):
        return (self.m, self.bits if self.bits is not None else x2, self.out, self.scale)

    def flags(self):
        return (True, _ELEM[self.fmt], self.scale_rounding == "ceil",
                self.rht_d if self.rht else 0, self.sr_mode)

    def result(self, amax, shape, orig_dtype) -> QuantizedTensor:
        return QuantizedTensor(
            fmt=self.fmt, data=self.data, scale=self.scale, amax=amax, shape=shape,
            orig_dtype=orig_dtype, block=(1, 32), rht_d=self.rht_d if self.rht else 0,
            extra={"scale_rounding": self.scale_rounding, "stochastic": self.stochastic},
            expanded=self.expanded)


def _run(x: torch.Tensor, row: _View | None, col: _View | None) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    rows, cols = x2.shape
    dev = x.device
    amax = torch.zeros(2, dtype=torch.float32, device=dev)
    srs = [v for v in (row, col) if v is not None and v.sr_mode == 2]
    seed = kernel_seed(srs[0].opts, dev) if srs else x2  # x2: never read
    dummy = (x2, x2, x2, x2)
    off = (False, 0, False, 0, 0)
    cfg = CONFIG
    n_tc = cdiv(cols, cfg["BC"])
    n_tiles = cdiv(rows, cfg["BR"]) * n_tc
    grid = (persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)
    _mx_kernel[grid](x2, amax, seed, rows, cols, n_tc, n_tiles,
                     *(row.args(x2) if row else dummy), *(col.args(x2) if col else dummy),
                     IN_DTYPE_CODE[x.dtype], cfg["BR"], cfg["BC"],
                     *(row.flags() if row else off), *(col.flags() if col else off),
                     cfg["NUM_STAGES"], cfg["PACK_COL"], bool(row and row.expanded),
                     bool(col and col.expanded), _col_reg(col), RHT_SIGN_MASK_32,
                     num_warps=cfg["num_warps"])
    return amax


def _col_reg(col: _View | None) -> bool:
    """Whether an MXFP4 column view runs with its blocks in registers (``quant_mx_col``)."""
    return bool(CONFIG["COL_REG"]) and col is not None and col.fmt == QFormat.MXFP4


def _reg_applies(x2: torch.Tensor, row, col) -> bool:
    """MXFP8 views (no RHT; ``(format, options)``, one of them may be None: the kernel then
    writes the other alone) on a shape of whole [128, 128] tiles, with ROWCOL "reg"."""
    mode = CONFIG["ROWCOL"]
    if mode not in ("mx", "reg"):
        raise ValueError(f"quant_mx.CONFIG['ROWCOL'] (MICROSCALE_MX_ROWCOL) must be 'mx' or "
                         f"'reg', got {mode!r}")
    views = [v for v in (row, col) if v is not None]
    return mode == "reg" and bool(views) \
        and all(v[0] in _ELEM and v[0] != QFormat.MXFP4 and not v[1].get("rht", False)
                for v in views) and x2.shape[0] % 128 == 0 and x2.shape[1] % 128 == 0


def _run_reg(x2: torch.Tensor, row: _View | None, col: _View | None, prologue=None,
             seg: int = 0) -> torch.Tensor:
    """The register pair kernel (a view None: the other alone); ``prologue`` ``(name, y)``:
    the views of ``op(x2, y)``; ``seg``: x2 stacks experts of ``seg`` rows, the column view
    per expert (0: one matrix)."""
    rows, cols = x2.shape
    amax = torch.zeros(2, dtype=torch.float32, device=x2.device)
    br, warps = CONFIG["BR_reg"], CONFIG["num_warps_reg"]
    if br not in (32, 64, 128):
        raise ValueError(f"quant_mx.CONFIG['BR_reg'] must be 32, 64 or 128, got {br!r}")
    if (br, warps) == (64, 2):
        raise ValueError("quant_mx.CONFIG: [64, 128] tiles (BR_reg 64) with 2 warps gave the "
                         "x pair bits other than the reference's on an H100 (session 21); use "
                         "4 warps or another BR_reg")
    bc = CONFIG["BC_reg"]
    if bc not in (64, 128):
        raise ValueError(f"quant_mx.CONFIG['BC_reg'] must be 64 or 128, got {bc!r}")
    n_tc, n_tiles = cols // bc, (rows // br) * (cols // bc)
    grid = (persistent_grid(n_tiles, x2.device, CONFIG["PROGS_PER_SM_reg"]),)
    r, c = row or col, col or row           # a missing view's arguments: the other's, unused
    mx8_rowcol_reg_kernel[grid](x2, amax, r.out, r.scale, c.out, c.scale, rows,
                                cols, n_tc, n_tiles, _ELEM[r.fmt], r.scale_rounding == "ceil",
                                _ELEM[c.fmt], c.scale_rounding == "ceil", CONFIG["NAN_SEL"],
                                CONFIG["NUM_STAGES_reg"], r.expanded, c.expanded,
                                CONFIG["REVERSE_reg"], br,
                                x2 if prologue is None or prologue[1] is None else prologue[1],
                                0 if prologue is None else PROLOGUES[prologue[0]][2],
                                IN_DTYPE_CODE[x2.dtype], seg or rows, row is not None,
                                col is not None, BC=bc, num_warps=CONFIG["num_warps_reg"])
    return amax


def mx_pairs_experts(w2: torch.Tensor, n_experts: int, row, col, expand_row: bool):
    """MXFP8 views of stacked expert weights ``w2 [E·N, K]``: W's row view (1x32 along K;
    written expanded, bf16 ``value · 2^k``, if ``expand_row``) and every expert's transpose
    ``[E, K, N]`` (1x32 along N) as codes, from one read of the master weights (the register
    pair kernel with per-expert column segments): ``((w_data, w_scale [E·N, K/32]), (t_data
    [E, K, N], t_scale [E, K, N/32]))``, bit for bit what quantizing each expert's W and Wᵀ
    gives. Views as ``(format, options)``; N a multiple of the kernel's tile rows."""
    rows, cols = w2.shape
    n = rows // max(n_experts, 1)
    if n * n_experts != rows or row is None or col is None or not _reg_applies(w2, row, col) \
            or n % CONFIG["BR_reg"] or rows == 0:
        raise KernelUnsupported("stacked MXFP8 expert weight pairs need the register kernel")
    check_kernel_input(w2)
    rv = _View(w2, row[0], row[1], False, expand_row, True)
    cv = _View(w2, col[0], col[1], True, False, True)
    _run_reg(w2, rv, cv, seg=n)
    return (rv.data, rv.scale), (cv.data.view(n_experts, cols, n),
                                 cv.scale.view(n_experts, cols, n // 32))


def _single(fmt: QFormat):
    def kernel(x: torch.Tensor, **opts) -> QuantizedTensor:
        check_input(x, fmt.value, 32, 1, opts.get("check_finite", True))
        check_kernel_input(x)
        x2 = x.reshape(-1, x.shape[-1])
        view = _View(x2, fmt, opts, transposed=False)
        return view.result(_run(x, view, None)[0], x.shape, x.dtype)
    kernel.__name__ = f"quantize_{fmt.value}_triton"
    kernel.__doc__ = f"Kernel twin of ``quantize_mx(x, {fmt.value!r}, ...)``."
    return kernel


def quantize_rowcol_mx_triton(x: torch.Tensor, row, col, expand=(False, False), prologue=None):
    """Kernel twin of ``ops.rowcol_reference`` for MX views (either may be None); ``expand``
    (a dispatch hint): views to write expanded (MXFP4; MXFP8 where the register pair kernel
    runs, else they stay codes and the op decodes them); ``prologue`` (a hint, ``(name,
    x2)``): the views of ``op(x, x2)`` (``op_specs.PROLOGUES``), fused into the register pair
    kernel's loads, applied first otherwise."""
    x2 = x.reshape(-1, x.shape[-1])
    check_views(x2, row, col, lambda fmt, opts: (32, 1))
    check_kernel_input(x)
    expand = expand if CONFIG["EXPAND"] else (False, False)
    # a pair runs the register kernel; one view alone where that pays: its prologue fused into
    # the loads, or the view written expanded (nn.recompute's column view: no decode pass)
    pays = (row is not None and col is not None) or prologue is not None \
        or (expand[0] if row else expand[1])
    reg = bool(pays) and _reg_applies(x2, row, col)
    x2, prologue = take_prologue(x2, prologue, reg)     # fused into the register pair kernel
    rv = _View(x2, row[0], row[1], False, expand[0], reg) if row else None
    cv = _View(x2, col[0], col[1], True, expand[1], reg) if col else None
    if reg:
        amax = _run_reg(x2, rv, cv, prologue)
        done = [n for n, v in (("row", rv), ("column", cv)) if v and v.expanded]
        note_path("quantize_rowcol", rowcol_key(row and row[0].value, col and col[0].value),
                  f"triton (MXFP8 {'pair' if rv and cv else 'view'}: tile in registers, "
                  "quant_rowcol_reg"
                  + (f"; {' and '.join(done)} view written expanded" if done else "")
                  + (f"; {prologue[0]} fused into its loads" if prologue else "") + ")")
    else:
        amax = _run(x2, rv, cv)
        note_path("quantize_rowcol", rowcol_key(row and row[0].value, col and col[0].value),
                  "triton (MX kernel" + ("; the MXFP4 column view's blocks in registers, "
                                         "quant_mx_col)" if _col_reg(cv) else ")"))
    rows, cols = x2.shape
    return (rv.result(amax[0], torch.Size((rows, cols)), x.dtype) if rv else None,
            cv.result(amax[1], torch.Size((cols, rows)), x.dtype) if cv else None)


quantize_rowcol_mx_triton.hints = ("expand", "prologue")
KERNELS = {fmt: register_kernel("quantize", fmt.value)(_single(fmt)) for fmt in _ELEM}
for _fmt in _ELEM:
    for _other in (*_ELEM, None):
        _names = (_fmt.value, _other.value if _other else "none")
        register_kernel("quantize_rowcol", "|".join(_names))(quantize_rowcol_mx_triton)
        register_kernel("quantize_rowcol", "|".join(reversed(_names)))(quantize_rowcol_mx_triton)
