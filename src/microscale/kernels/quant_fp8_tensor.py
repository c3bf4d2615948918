"""Fused FP8 tensorwise quantization (SPEC §8), bit-exact with ``quant.fp8.quantize_fp8_tensor``.

Tensorwise scaling needs the whole tensor's amax before the first element can be cast, so
two launches:

1. **amax pass** -- a persistent grid reads x once, keeps an elementwise running max per
   program and folds it into one fp32 with an atomic max.
2. **cast pass** -- a program loops over ``[BR, BC]`` tiles of x and writes the row view
   ``data[rows, cols]`` and/or the column view ``data[cols, rows]`` (xᵀ, what the wgrad GEMM
   and a weight's dgrad GEMM read: Hopper's FP8 tensor cores want both operands K-major).
   Each view has its own scale: *current* scaling derives it in-kernel from the amax with
   the reference's rule (``fp8_max / amax``, 0 -> 1, inf -> the input dtype's max, amax =
   Inf -> 1, optional power of two); *delayed* scaling loads the caller's fp32 scale (the
   layer's amax history). Program 0 writes ``scale_inv = 1 / scale``. A NaN element is read
   as 0 by the amax and stored as the NaN byte 0x7F.

One pass over x instead of two when the amax pass is not needed: every view's scale given
(delayed scaling; the amax, then an output only, is folded into the cast pass), or the amax
given (``amax=``: agreed over ranks, or taken by the caller's compiled graph, as
``nn/function.py`` does under ``torch.compile``, where Inductor fuses that reduction into the
kernel producing x; the scales still come from the kernel's own division, so the bits do not
depend on how a compiler divides).

No host synchronisation anywhere: the amax and the scales stay on the device, which is what
lets a training step run under CUDA graphs. Bytes per element for bf16 x: 2 + 2 read, 1
written per view (the second read of x mostly hits L2 at these sizes only for small x).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..op_specs import PROLOGUES
from ..quant.common import check_given_scalar
from ..quant.fp8 import FP8_MAX
from ..tensor import QFormat, QuantizedTensor
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_views, persistent_grid,
                     split_nan, take_prologue, tile_coords)
from .quant_fp8 import _IN_MAX, _fp8_byte, _scale_from_vmax
from .quant_rowcol_reg import prologue_value

__all__ = ["quantize_fp8_tensor_triton", "quantize_rowcol_fp8_tensor_triton", "CONFIG"]

CONFIG = {"BR": 64, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 8, "NUM_STAGES": 2,
          "AMAX_BLOCK": 4096, "AMAX_WARPS": 8, "AMAX_PROGS_PER_SM": 4}

_OPTS = ("fp8_dtype", "pow2_scales", "scale", "amax", "check_finite")


@triton.jit
def _amax_kernel(x_ptr, amax_ptr, n, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    n_blocks = tl.cdiv(n, BLOCK)
    for b in tl.range(tl.program_id(0), n_blocks, tl.num_programs(0), num_stages=NUM_STAGES):
        offs = b * BLOCK + tl.arange(0, BLOCK)        # < n < 2^31: int32 is enough
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, tl.where(v != v, 0.0, tl.abs(v)))       # NaN read as 0
    tl.atomic_max(amax_ptr, tl.max(acc, axis=0))


@triton.jit
def _view_scale(amax, given_ptr, GIVEN: tl.constexpr, FP8_MAX: tl.constexpr,
                IN_MAX: tl.constexpr, POW2: tl.constexpr):
    if GIVEN:
        scale = tl.load(given_ptr)
    else:
        scale = _scale_from_vmax(amax, FP8_MAX, IN_MAX, POW2)
    return scale


@triton.jit
def _cast_kernel(x_ptr, amax_ptr, gr_ptr, gc_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr,
                 rows, cols, n_tc, n_tiles, IN_MAX: tl.constexpr,
                 ROW: tl.constexpr, R_MAX: tl.constexpr, R_E5M2: tl.constexpr,
                 R_POW2: tl.constexpr, R_GIVEN: tl.constexpr,
                 COL: tl.constexpr, C_MAX: tl.constexpr, C_E5M2: tl.constexpr,
                 C_POW2: tl.constexpr, C_GIVEN: tl.constexpr,
                 BR: tl.constexpr, BC: tl.constexpr, NUM_STAGES: tl.constexpr,
                 AMAX_HERE: tl.constexpr, y_ptr=None, PRO: tl.constexpr = 0,
                 IN_DTYPE: tl.constexpr = 1):
    """Cast tiles of x with the views' scales. AMAX_HERE (every view's scale given): no amax
    pass ran before; the amax (an output only) is folded in here by atomic max. PRO > 0: cast
    ``op(x, y)`` (``quant_rowcol_reg.prologue_value``) instead of x."""
    if AMAX_HERE:
        amax = 0.0
        acc = tl.zeros((BR, BC), dtype=tl.float32)
    else:
        amax = tl.load(amax_ptr)
    s_r = _view_scale(amax, gr_ptr, R_GIVEN, R_MAX, IN_MAX, R_POW2)
    s_c = _view_scale(amax, gc_ptr, C_GIVEN, C_MAX, IN_MAX, C_POW2)
    if tl.program_id(0) == 0:
        if ROW:
            tl.store(sr_ptr, tl.math.div_rn(1.0, s_r))
        if COL:
            tl.store(sc_ptr, tl.math.div_rn(1.0, s_c))
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_r = r0 + tl.arange(0, BR)
        offs_c = c0 + tl.arange(0, BC)
        mask = (offs_r < rows)[:, None] & (offs_c < cols)[None, :]
        offs = offs_r[:, None] * cols + offs_c[None, :]
        x_in = tl.load(x_ptr + offs, mask=mask, other=0.0)
        if PRO > 0:
            x, nan = split_nan(prologue_value(x_in, y_ptr, offs, mask, PRO, IN_DTYPE))
        else:
            x, nan = split_nan(x_in.to(tl.float32))
        if ROW:
            tl.store(qr_ptr + offs_r[:, None] * cols + offs_c[None, :],
                     _fp8_byte(x * s_r, R_E5M2, nan), mask=mask)
        if COL:   # xᵀ: transposed in registers (via shared memory) so the store is coalesced
            tl.store(qc_ptr + offs_c[:, None] * rows + offs_r[None, :],
                     tl.trans(_fp8_byte(x * s_c, C_E5M2, nan)), mask=tl.trans(mask))
        if AMAX_HERE:
            acc = tl.maximum(acc, tl.abs(x))
    if AMAX_HERE:
        tl.atomic_max(amax_ptr, tl.max(tl.max(acc, axis=1), axis=0))


# --------------------------------------------------------------------------- host side
class _View:
    def __init__(self, opts: dict, shape: tuple[int, int], device: torch.device):
        unknown = set(opts) - set(_OPTS)
        if unknown:
            raise KernelUnsupported(f"options {sorted(unknown)}")
        self.fp8_dtype = opts.get("fp8_dtype", torch.float8_e4m3fn)
        if self.fp8_dtype not in FP8_MAX:
            raise KernelUnsupported(f"fp8_dtype={self.fp8_dtype}")
        self.pow2 = bool(opts.get("pow2_scales", False))
        given = opts.get("scale")
        check_given_scalar(given, "scale", "fp8_tensor", opts.get("check_finite", True))
        self.amax = opts.get("amax")
        check_given_scalar(self.amax, "amax", "fp8_tensor", opts.get("check_finite", True))
        if given is not None and self.amax is not None:
            raise ValueError("fp8_tensor: give a scale (delayed scaling) or an amax, not both")
        self.given = None if given is None else given.float().reshape(1).to(device)
        self.shape = shape
        self.data = torch.empty(shape, dtype=self.fp8_dtype, device=device)
        self.scale_inv = torch.empty((), dtype=torch.float32, device=device)

    def constexprs(self) -> tuple:
        return (True, FP8_MAX[self.fp8_dtype], self.fp8_dtype == torch.float8_e5m2, self.pow2,
                self.given is not None)

    def result(self, amax: torch.Tensor, orig_dtype: torch.dtype) -> QuantizedTensor:
        return QuantizedTensor(fmt=QFormat.FP8_TENSOR, data=self.data, scale=self.scale_inv,
                               amax=amax, shape=torch.Size(self.shape), orig_dtype=orig_dtype,
                               block=self.shape, extra={"pow2_scales": self.pow2})


def _run(x2: torch.Tensor, row: _View | None, col: _View | None, prologue=None) -> torch.Tensor:
    """Launch the passes; ``prologue`` ``(name, y)`` (only with the amax given or every scale
    given, when no amax pass reads x): cast ``op(x2, y)``."""
    rows, cols = x2.shape
    cfg, dev = CONFIG, x2.device
    n = x2.numel()
    views = [v for v in (row, col) if v is not None]
    given_amax = {id(v.amax): v.amax for v in views if v.amax is not None}
    if given_amax and (len(given_amax) > 1 or any(v.amax is None for v in views)):
        raise KernelUnsupported("an amax given to one view only, or two different amaxes")
    # every scale given (delayed scaling): the amax is an output only, folded into the cast
    # pass; an amax given (agreed over ranks, or taken in the caller's compiled graph): the
    # scales come from it by the kernel's own rule; else an amax pass comes first
    here = all(v is None or v.given is not None for v in (row, col))
    amax = next(iter(given_amax.values())).float().reshape(1).to(dev) if given_amax else \
        torch.zeros(1, dtype=torch.float32, device=dev)
    if not here and not given_amax:
        n_blocks = cdiv(n, cfg["AMAX_BLOCK"])
        _amax_kernel[(persistent_grid(n_blocks, dev, cfg["AMAX_PROGS_PER_SM"]),)](
            x2, amax, n, BLOCK=cfg["AMAX_BLOCK"], NUM_STAGES=cfg["NUM_STAGES"],
            num_warps=cfg["AMAX_WARPS"])
    n_tc = cdiv(cols, cfg["BC"])
    n_tiles = cdiv(rows, cfg["BR"]) * n_tc
    off = (False, 448.0, False, False, False)
    bufs = []
    for v in (row, col):
        bufs += [amax, amax, amax] if v is None else \
            [v.given if v.given is not None else amax, v.data.view(torch.uint8), v.scale_inv]
    (gr, qr, sr), (gc, qc, sc) = bufs[:3], bufs[3:]
    _cast_kernel[(persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)](
        x2, amax, gr, gc, qr, sr, qc, sc, rows, cols, n_tc, n_tiles,
        _IN_MAX[IN_DTYPE_CODE[x2.dtype]], *(row.constexprs() if row else off),
        *(col.constexprs() if col else off), cfg["BR"], cfg["BC"], cfg["NUM_STAGES"], here,
        x2 if prologue is None or prologue[1] is None else prologue[1],
        0 if prologue is None else PROLOGUES[prologue[0]][2], IN_DTYPE_CODE[x2.dtype],
        num_warps=cfg["num_warps"])
    return amax.reshape(())


@register_kernel("quantize", QFormat.FP8_TENSOR.value)
def quantize_fp8_tensor_triton(x: torch.Tensor, **opts) -> QuantizedTensor:
    """Kernel twin of :func:`microscale.quant.quantize_fp8_tensor` (same signature)."""
    q_row, _ = quantize_rowcol_fp8_tensor_triton(x, (QFormat.FP8_TENSOR, opts), None)
    return replace(q_row, shape=x.shape)


def quantize_rowcol_fp8_tensor_triton(x: torch.Tensor, row, col, prologue=None):
    """Kernel twin of ``ops.rowcol_reference`` for tensorwise FP8 views. ``prologue`` (a hint,
    ``(name, x2)``): the views of ``op(x, x2)`` (``op_specs.PROLOGUES``), fused into the cast
    pass when it is the only pass (amax or scales given), applied first otherwise."""
    x2 = x.reshape(-1, x.shape[-1])
    check_views(x2, row, col, lambda fmt, opts: (1, 1))
    check_kernel_input(x)
    rows, cols = x2.shape
    rv = _View(row[1], (rows, cols), x.device) if row else None
    cv = _View(col[1], (cols, rows), x.device) if col else None
    # fused into the cast pass when it is the only pass; an amax pass would read x: x first
    x2, prologue = take_prologue(x2, prologue, all(
        v is None or v.given is not None or v.amax is not None for v in (rv, cv)))
    if prologue is not None:
        note_path("quantize_rowcol", rowcol_key(*(QFormat.FP8_TENSOR.value if v else None
                                                  for v in (rv, cv))),
                  f"triton (cast pass; {prologue[0]} fused into its loads)")
    amax = _run(x2, rv, cv, prologue)
    return (rv.result(amax, x.dtype) if rv else None, cv.result(amax, x.dtype) if cv else None)


quantize_rowcol_fp8_tensor_triton.hints = ("prologue",)

for _key in ("fp8_tensor|fp8_tensor", "fp8_tensor|none", "none|fp8_tensor"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_fp8_tensor_triton)
