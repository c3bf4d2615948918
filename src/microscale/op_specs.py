"""The ops' static specs (:mod:`microscale.ops`): quantized views, their layouts, GEMM operands.

A *view spec* is a quantized view's format plus its non-tensor options as canonical JSON: a
static string in an op's schema, so a compiler specialises on it, while tensor options (seed,
random bits, a given amax or scale) travel as tensors. From a spec and a ``[rows, cols]`` view
the fake implementations know every output's shape, dtype and strides::

    format        codes               scales
    nvfp4         uint8 [r, c/2]      float8_e4m3fn [r, c/16]
    mxfp4         uint8 [r, c/2]      uint8 (UE8M0) [r, c/32]
    mxfp8_*       fp8   [r, c]        uint8 (UE8M0) [r, c/32]
    fp8_block     fp8   [r, c]        fp32 [r/br, c/bc]; 1×128: column-major, strides (1, r)
    fp8_tensor    fp8   [r, c]        fp32 []

A view with ``"expand": true`` (NVFP4 / MXFP4 / MXFP8; ``tensor.py``) has bf16 ``[r, c]``
``value · block_scale`` data instead of codes, for a GEMM that decodes its operands to bf16.

The 1×128 FP8 scales are stored column-major because that is the layout cuBLASLt's blockwise
GEMM reads: produced that way, no GEMM call transposes them.

A column view with ``"amax_only": true`` (``quantize_rowcol``; NVFP4 1×16, rounded to nearest)
is not written: its slot holds two empty tensors and the fp32 amax the view would have
measured (after its RHT), which the kernels' amax pass takes beside the row view's in the same
read (``nn.recompute`` keeps it for the view it quantizes in backward).

A *prologue* (``quantize_rowcol``'s ``prologue`` / ``x2``): quantize ``op(x, x2)`` instead of x,
for ``op`` in :data:`PROLOGUES` (one correctly rounded multiply each, plus exact selects), where
a kernel can apply it to what it loads (``nn.recompute``: the MLP's input recomputed in
backward, never written out in bf16; ``nn.mlp``: the relu² MLP's up-projection gradient
quantized from the down projection's dgrad output and the kept pre-activation); elsewhere the
op is applied first, with the same bits::

    square            x²                      relu² after the relu
    mul               x · x2                  SwiGLU after the silu
    relu_square       relu(x)²                relu² from the pre-activation u
    relu_square_grad  x · (2 relu(x2)) where x2 > 0, else 0
                                              d/du of relu(u)², x = its output's gradient

``relu_square_grad`` is what eager autograd computes through ``torch.square(torch.relu(u))``:
square's backward ``grad · (2 r)`` (one rounding; ``2 r`` is exact) then relu's
``threshold_backward`` (``0`` where ``r <= 0``, so NaN passes through and a zero is +0).

An *operand spec* (:func:`operand_spec`) is the static half of a ``scaled_mm`` operand, a string
in that op's schema: ``"fmt,block_rows,block_cols,rht_d,form"`` (block ``0,0`` for tensorwise
FP8; form ``e`` for expanded bf16 data, ``c`` for codes). :func:`_operand` rebuilds the
:class:`~microscale.tensor.QuantizedTensor` from it and the op's three tensors, K read off the
data's shape (two codes per byte for FP4).
"""

from __future__ import annotations

import functools
import json

import torch
from torch import Tensor

from .quant.nvfp4 import nvfp4_amax
from .tensor import QFormat, QuantizedTensor

_TENSOR_OPTIONS = ("seed", "rand_bits", "amax", "scale")


def _relu_square(u: Tensor) -> Tensor:
    return torch.square(torch.relu(u))


def _relu_square_grad(ds: Tensor, u: Tensor) -> Tensor:
    r = torch.relu(u)
    return torch.where(r <= 0, 0, ds * (r * 2))      # threshold_backward(pow_backward(ds), r)


# prologue name -> (op, number of tensors it takes, kernels' constexpr code)
PROLOGUES = {"square": (torch.square, 1, 1), "mul": (torch.mul, 2, 2),
             "relu_square": (_relu_square, 1, 3), "relu_square_grad": (_relu_square_grad, 2, 4)}
_FP8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def view_spec(fmt: QFormat, options: dict) -> str:
    """Canonical JSON of a view's static options (tensor options and the generator left out)."""
    static = tuple(sorted((k, v) for k, v in options.items()
                          if k not in _TENSOR_OPTIONS and k != "generator"))
    return _spec(fmt.value, static)


@torch.compiler.assume_constant_result
def _spec(fmt: str, static: tuple) -> str:
    """(Cached; a constant to dynamo, which need not trace the JSON encoder.)"""
    try:
        return _spec_cached(fmt, static)
    except TypeError:                        # an unhashable option value: no caching
        return _spec_uncached(fmt, static)


@functools.lru_cache(maxsize=1024)
def _spec_cached(fmt: str, static: tuple) -> str:
    return _spec_uncached(fmt, static)


def _spec_uncached(fmt: str, static: tuple) -> str:
    d = {}
    for key, value in static:
        if isinstance(value, torch.dtype):
            value = str(value).replace("torch.", "")
        elif isinstance(value, tuple):
            value = list(value)
        d[key] = value
    try:
        return json.dumps({"fmt": fmt, **d}, sort_keys=True)
    except TypeError:
        bad = [k for k, v in d.items() if not _jsonable(v)]
        raise TypeError(f"quantize({fmt!r}): option(s) {', '.join(bad)} must be a number, "
                        "bool, string, tuple or dtype") from None


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=512)
def _parse(spec: str) -> tuple[QFormat, tuple]:
    d = json.loads(spec)
    fmt = QFormat(d.pop("fmt"))
    if "block" in d and isinstance(d["block"], list):
        d["block"] = tuple(d["block"])
    if d.get("fp8_dtype") in _FP8:
        d["fp8_dtype"] = _FP8[d["fp8_dtype"]]
    return fmt, tuple(d.items())


def parse_view_spec(spec: str) -> tuple[QFormat, dict]:
    """Inverse of :func:`view_spec` (a fresh dict each call; parsing is cached)."""
    fmt, items = _parse(spec)
    return fmt, dict(items)


def _meta(fmt: QFormat, opts: dict, rows, cols) -> dict:
    """``block``, ``rht_d``, ``extra`` and ``expanded`` of the QuantizedTensor of a view."""
    if fmt == QFormat.NVFP4:
        return {"block": (16, 16) if opts.get("block_2d") else (1, 16),
                "rht_d": int(opts.get("rht_d", 16)) if opts.get("rht") else 0,
                "extra": {"stochastic": bool(opts.get("stochastic", False))},
                "expanded": bool(opts.get("expand", False))}
    if fmt == QFormat.FP8_BLOCK:
        return {"block": tuple(opts.get("block", (1, 128))), "rht_d": 0,
                "extra": {"pow2_scales": opts.get("pow2_scales", True)}}
    if fmt == QFormat.FP8_TENSOR:
        return {"block": (rows, cols), "rht_d": 0,
                "extra": {"pow2_scales": opts.get("pow2_scales", False)}}
    return {"block": (1, 32), "rht_d": int(opts.get("rht_d", 32)) if opts.get("rht") else 0,
            "extra": {"scale_rounding": opts.get("scale_rounding", "ceil"),
                      "stochastic": bool(opts.get("stochastic", False))},
            "expanded": bool(opts.get("expand", False))}


def _layout(fmt: QFormat, opts: dict, rows, cols):
    """``((data shape, dtype), (scale shape, dtype))`` of a ``[rows, cols]`` view (tensor.py)."""
    expanded = ((rows, cols), torch.bfloat16) if opts.get("expand") else None
    if fmt == QFormat.NVFP4:
        return expanded or ((rows, cols // 2), torch.uint8), \
            ((rows, cols // 16), torch.float8_e4m3fn)
    if fmt == QFormat.MXFP4:
        return expanded or ((rows, cols // 2), torch.uint8), ((rows, cols // 32), torch.uint8)
    if fmt.is_mx8:
        elem = torch.float8_e4m3fn if fmt == QFormat.MXFP8_E4M3 else torch.float8_e5m2
        return expanded or ((rows, cols), elem), ((rows, cols // 32), torch.uint8)
    fp8 = opts.get("fp8_dtype", torch.float8_e4m3fn)
    if fmt == QFormat.FP8_BLOCK:
        br, bc = opts.get("block", (1, 128))
        return ((rows, cols), fp8), ((rows // br, cols // bc), torch.float32)
    return ((rows, cols), fp8), ((), torch.float32)


def amax_only_view(fmt: QFormat, opts: dict, expand: bool = False) -> tuple | None:
    """``(format, options without amax_only)`` of a column view asked for its amax alone (the
    module docstring), None for any other view; an amax-only view that is not a 1×16 NVFP4
    view rounded to nearest, written as codes with no amax given, raises."""
    if not opts.get("amax_only"):
        return None
    opts = {k: v for k, v in opts.items() if k != "amax_only"}
    if fmt != QFormat.NVFP4 or expand or opts.get("stochastic") or opts.get("block_2d") \
            or opts.get("amax") is not None:
        raise ValueError(f"quantize_rowcol: an amax_only column view must be a 1x16 NVFP4 view "
                         f"with no expand, SR or given amax, got {fmt.value} {sorted(opts)}"
                         f"{' expand' if expand else ''}")
    return fmt, opts


def amax_only_reference(x: Tensor, view: tuple) -> Tensor:
    """The reference's amax of the column view ``view`` (:func:`amax_only_view`) of ``x``: what
    the kernels' amax pass measures for it."""
    opts = view[1]
    return nvfp4_amax(x.reshape(-1, x.shape[-1]).t(), bool(opts.get("rht", False)),
                      int(opts.get("rht_d", 16)))


def scale_col_major(fmt: QFormat, opts: dict) -> bool:
    """True for FP8 1×128 views: their fp32 scales ``[rows, K/128]`` are stored *column-major*
    (strides ``(1, rows)``), the layout cuBLASLt's blockwise GEMM reads (``kernels/gemm_fp8``),
    so no GEMM call transposes them (session 8: ~2 ms of copy kernels in a 125m step)."""
    return fmt == QFormat.FP8_BLOCK and tuple(opts.get("block", (1, 128)))[0] == 1


def col_major_like(scale: Tensor) -> Tensor:
    """``scale`` ``[rows, kb]`` in the column-major layout (itself where it already is one:
    strides ``(1, rows)``, those of a contiguous ``[kb, rows]`` transposed)."""
    rows, kb = scale.shape
    if scale.stride() == (1, rows):
        return scale
    return scale.new_empty((kb, rows)).t().copy_(scale)


def apply_prologue(prologue: str, x: Tensor, x2: Tensor | None) -> Tensor:
    """``op(x[, x2])`` for a prologue name ("" = x itself), as eager torch computes it."""
    if not prologue:
        return x
    op, n, _ = PROLOGUES[prologue]
    return op(x) if n == 1 else op(x, x2)


def check_prologue(prologue: str, x: Tensor, x2: Tensor | None) -> None:
    """A clear error for an unknown prologue or a second tensor that does not match."""
    if prologue and prologue not in PROLOGUES:
        raise ValueError(f"quantize_rowcol: prologue must be one of {sorted(PROLOGUES)} or '', "
                         f"got {prologue!r}")
    wants = PROLOGUES[prologue][1] == 2 if prologue else False
    if wants != (x2 is not None) or (x2 is not None and (x2.shape != x.shape or
                                                          x2.dtype != x.dtype)):
        raise ValueError(f"quantize_rowcol: prologue {prologue!r} takes "
                         f"{'a second tensor like x' if wants else 'no second tensor'}; got "
                         f"{None if x2 is None else (tuple(x2.shape), x2.dtype)} with x "
                         f"{(tuple(x.shape), x.dtype)}")


def check_epilogue(where: str, epilogue: str, e2: Tensor | None, shape, out_dtype) -> None:
    """A clear error for a GEMM epilogue that is not an op of y and one more tensor of y's
    ``shape`` in the output dtype (``PROLOGUES``' ops of two tensors)."""
    if PROLOGUES.get(epilogue, (None, 1))[1] != 2:
        two = sorted(k for k, v in PROLOGUES.items() if v[1] == 2)
        raise ValueError(f"{where}: epilogue must be one of {two}, got {epilogue!r}")
    if e2 is None or tuple(e2.shape) != tuple(shape) or e2.dtype != out_dtype:
        got = None if e2 is None else (tuple(e2.shape), e2.dtype)
        raise ValueError(f"{where}: the {epilogue} epilogue needs e2 of shape {tuple(shape)} "
                         f"in {out_dtype}, got {got}")


class OutAmax:
    """A GEMM's request for its output's NVFP4 amaxes (``ops_gemm.mm_amax``): ``buf`` a zeroed
    fp32 ``[2]`` that receives ``max|t|`` (a row view's amax) and ``max|RHT(t)|`` down the
    columns' 16-row chunks where ``rht`` (a column view's, SPEC §4), else ``max|t|`` again;
    NaN read as 0, as the amax pass measures them. ``t`` is the output y, or ``op(y)`` for
    ``op`` one of ``PROLOGUES``' one-tensor ops (the relu² MLP's ``relu(u)²``). A kernel that
    measures them in its epilogue sets ``filled``; otherwise the op measures them after
    (:func:`out_amax_reference`)."""

    __slots__ = ("buf", "rht", "op", "filled")

    def __init__(self, buf: Tensor, rht: bool, op: str = ""):
        if op and PROLOGUES.get(op, (None, 2))[1] != 1:
            one = sorted(k for k, v in PROLOGUES.items() if v[1] == 1)
            raise ValueError(f"an output amax's op must be one of {one} or '', got {op!r}")
        self.buf, self.rht, self.op, self.filled = buf, rht, op, False


def out_amax_reference(y: Tensor, rht: bool, op: str = "") -> Tensor:
    """``OutAmax``'s two amaxes of a 2-D ``y`` (or ``op(y)``) by the reference
    (``quant.nvfp4.nvfp4_amax``): of the rows, and of the transpose's rows after the d = 16
    RHT where ``rht``."""
    t = apply_prologue(op, y, None) if op else y
    row = nvfp4_amax(t)
    return torch.stack([row, nvfp4_amax(t.t(), rht=True) if rht else row])


def _rows_cols(x: Tensor):
    cols = x.shape[-1] if x.dim() else 1
    return (x.numel() // cols if cols else 0), cols


# ----------------------------------------------------------------------------- GEMM operands
def operand_spec(q: QuantizedTensor) -> str:
    """Static description of a GEMM operand: format, block (0,0 for tensorwise), RHT size and
    whether it is expanded (``e``, bf16 ``value · block_scale`` data) or codes (``c``)."""
    br, bc = (0, 0) if q.fmt == QFormat.FP8_TENSOR else q.block
    return f"{q.fmt.value},{br},{bc},{q.rht_d},{'e' if q.expanded else 'c'}"


@functools.lru_cache(maxsize=256)
def _operand_meta(spec: str) -> tuple[QFormat, int, int, int, bool]:
    name, br, bc, rht_d, form = spec.split(",")
    return QFormat(name), int(br), int(bc), int(rht_d), form == "e"


def _operand(data: Tensor, scale: Tensor, amax: Tensor, spec: str) -> QuantizedTensor:
    fmt, br, bc, rht_d, expanded = _operand_meta(spec)
    rows = data.shape[0]
    cols = data.shape[1] * (2 if fmt.is_fp4 and not expanded else 1)
    block = (rows, cols) if fmt == QFormat.FP8_TENSOR else (br, bc)
    return QuantizedTensor(fmt=fmt, data=data, scale=scale, amax=amax, shape=torch.Size((rows, cols)),
                           orig_dtype=torch.float32, block=block, rht_d=rht_d,
                           expanded=expanded)
