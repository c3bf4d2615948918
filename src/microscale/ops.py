"""The quantizers and the scaled GEMM as ``torch.library`` custom ops (namespace ``microscale``).

Why ops. ``torch.compile`` cannot trace the kernels' host code (Triton launches, option parsing,
checks that raise), and should not: a custom op is opaque to the compiler. Its *fake*
implementation gives dynamo and Inductor the output shapes and dtypes from the input shapes and
the op's static arguments alone; at run time the real implementation calls the one dispatch
layer (:func:`microscale.backend.dispatch`: a Triton kernel or the reference), exactly as eager
code does. So a compiled model and an eager one compute bit-identical quantized operands, a
quantized layer traces into one graph with no breaks, and with no host synchronisation inside
(the kernels keep amax, scales and SR seeds on the device) the step can be captured in a CUDA
graph.

The ops and their tensors::

    quantize(x, spec, backend, seed, rand_bits, amax, scale)   -> (data, scale, amax)
    quantize_rowcol(x, row, col, backend, seed, row_rand_bits, col_rand_bits,
                    row_amax, col_amax, row_scale, col_scale,   -> row (data, scale, amax)
                    prologue="", x2=None)                        + col (data, scale, amax)
                    (the views of op(x, x2) for a prologue, op_specs.PROLOGUES)
    scaled_mm(a_data, a_scale, a_amax, a_spec, b_data, b_scale, b_amax, b_spec,
              out_dtype, backend, apply_factor,                  -> y [rows_a, rows_b]
              epilogue="", e2=None)
                    (op(y, e2) for an epilogue, op_specs.PROLOGUES' ops of two tensors)
    expand(data, scale, amax, spec, backend)                     -> bf16 value · block_scale
    delayed_scaling_update_(amax_history, scale, amax, fp8_max, margin)   (in place)

A *view spec* is the format plus its non-tensor options as canonical JSON (a static string in
the op schema, so the compiler specialises on it); tensor options travel as tensors. An
unrequested row/col view comes back as three empty tensors; so does the column view's amax of
an MX or FP8 blockwise pair (``CONFIG["SHARE_COL_AMAX"]``: it is the row view's, and
:func:`quantize_views` gives both views that one tensor); an NVFP4 column view asked for with
``amax_only`` comes back as two empty tensors and its amax, measured in the row view's pass
(:mod:`microscale.op_specs`). An *operand spec* is
``"fmt,block_rows,block_cols,rht_d,form"`` (form ``c``: codes, ``e``: expanded); the operand's K
is read off its data's shape. Both kinds of spec and the outputs' layouts (FP8 1×128 scales
column-major) live in :mod:`microscale.op_specs`.

Stochastic rounding never draws random numbers inside an op: the caller draws a ``seed``
tensor (:func:`~microscale.quant.common.draw_seed`, from a generator or torch's default one)
and the op derives every random byte from it (the kernels with in-kernel Philox, the reference
through a generator seeded with it; a row/col pair uses ``seed`` and ``seed + 1``). So an op
call is a pure function of its inputs: compiled graphs may reorder or deduplicate it.

:func:`quantize_view` / :func:`quantize_views` / :func:`mm` are the Python entry points that
pack the ops' tensors into :class:`~microscale.tensor.QuantizedTensor` (what the public
``ms.quantize`` / ``ms.quantize_rowcol`` / ``ms.scaled_mm`` and the layers call).

Host cost. A step that is not replayed as one CUDA graph (FSDP2, DDP, a Hugging Face model)
pays every op call's Python on the host. ``torch.library.custom_op`` wraps an implementation in
an autograd layer, a dynamo-disable wrapper and a run-time aliasing check; the layers never
need the first (the ops run inside :class:`~microscale.nn.function.QuantizedLinearFn` on
detached tensors) and :func:`_fresh` already guarantees the last. So the ops are defined with
the dispatcher's own ``Library.define`` / ``impl`` (one ``CompositeExplicitAutograd`` kernel
for every device) plus ``register_fake``: the same schemas and compile behaviour, about 13 µs
less per call on a workstation CPU; on an H200 host the per-op change was within the noise of
``benchmarks/bench_host.py``. Most of an op's host time is its kernel wrapper's own Python.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import torch
from torch import Tensor

from .backend import (dispatch, explain, has_kernel, kernel_takes_hint, note_path,
                      rowcol_key, wants_kernel)
from .quant import quantize_fp8_block, quantize_fp8_tensor, quantize_mx, quantize_nvfp4
from .quant.common import draw_seed
from .quant.fp8 import delayed_scale_update_
from .tensor import QFormat, QuantizedTensor
from .validate import check_generator

_LIB = torch.library.Library("microscale", "FRAGMENT")      # the ops of this module
# SHARE_COL_AMAX: a quantize_rowcol pair whose two views have one amax by definition (MX and FP8
# blockwise views, no RHT: both are max |x| over the same elements) returns it once, as the row
# view's, and an empty column slot: the kernels' two-amax buffer needs no copy for the column
# view (an op's outputs may not share storage) -- one launch fewer per MX/FP8 pair (session 27)
CONFIG = {"SHARE_COL_AMAX": True}
_SHARED_AMAX_FORMATS = (QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2, QFormat.MXFP4, QFormat.FP8_BLOCK)


def _define(schema: str, impl) -> None:
    """``microscale::<name>`` with ``schema``, run by ``impl`` on every device (no autograd
    formula: the layers call the ops on detached tensors inside their autograd.Function)."""
    _LIB.define(schema)
    _LIB.impl(schema.split("(", 1)[0], impl, "CompositeExplicitAutograd")


def _fake(name: str):
    return torch.library.register_fake(f"microscale::{name}", lib=_LIB)

__all__ = ["view_spec", "parse_view_spec", "operand_spec", "quantize_view", "quantize_views",
           "mm", "hp_mm", "delayed_scaling_update_", "reference_quantizer", "rowcol_views",
           "rowcol_reference", "expand"]

from .op_specs import (  # noqa: F401  (re-exported: ops_grouped, ops_many, kernels, tests)
    _layout, _meta, _operand, _rows_cols, amax_only_reference, amax_only_view, apply_prologue,
    check_prologue, col_major_like, operand_spec, parse_view_spec, scale_col_major, view_spec)


# ============================================================================ references
def reference_quantizer(fmt: QFormat):
    """The reference quantizer for ``fmt`` (signature ``(x, **options) -> QuantizedTensor``)."""
    if fmt == QFormat.NVFP4:
        return quantize_nvfp4
    if fmt == QFormat.FP8_BLOCK:
        return quantize_fp8_block
    if fmt == QFormat.FP8_TENSOR:
        return quantize_fp8_tensor
    return functools.partial(quantize_mx, fmt=fmt)


def rowcol_views(x: Tensor, row, col, backend: str = "reference"):
    """Both views by two single-view ``quantize`` dispatches (the reference's definition of
    ``quantize_rowcol``, and what runs when no fused kernel takes the pair); the column view
    quantizes ``x2ᵀ`` with ``seed + 1``."""
    x2 = x.reshape(-1, x.shape[-1])
    q_row = q_col = None
    if row:
        q_row = dispatch("quantize", row[0].value, backend, x.device, reference_quantizer(row[0]),
                         x2, **row[1])
    if col:
        opts = dict(col[1])
        if opts.get("seed") is not None:
            opts["seed"] = opts["seed"] + 1
        q_col = dispatch("quantize", col[0].value, backend, x.device, reference_quantizer(col[0]),
                         x2.t().contiguous(), **opts)
    return q_row, q_col


rowcol_reference = functools.partial(rowcol_views, backend="reference")


def _fresh(outs, inputs) -> tuple:
    """Outputs that share storage with an input or an earlier output are cloned (an op's
    outputs may not alias its inputs or each other, e.g. a given amax, or one amax buffer), and
    so are outputs that start inside their storage: Inductor takes a custom op's outputs to be
    fresh allocations and asserts their 16-byte alignment (a column-only NVFP4 call returned
    its amax as element 1 of the kernel's two-amax buffer, which failed that assert on CUDA)."""
    seen = {t.untyped_storage().data_ptr() for t in inputs if t is not None and t.numel()}
    result = []
    for t in outs:
        if t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen or t.storage_offset():
                t = t.clone()
                ptr = t.untyped_storage().data_ptr()
            seen.add(ptr)
        result.append(t)
    return tuple(result)


@functools.lru_cache(maxsize=1024)
def _view_plan(spec: str) -> tuple[QFormat, tuple, bool, bool]:
    """What a view spec says, parsed once: ``(format, static options without "expand",
    expand?, 1×128 scales column-major?)``. A cached tuple: the op builds each call's options
    dict from it (tensor options added) instead of re-parsing and re-deciding per call."""
    fmt, opts = parse_view_spec(spec)
    expand = bool(opts.pop("expand", False))
    return fmt, tuple(opts.items()), expand, scale_col_major(fmt, opts)


def _view_options(spec: str, **tensors):
    """``((format, options), expand?, column-major scales?)`` of one requested view: its spec's
    static options plus the tensor options given (a fresh dict per call)."""
    fmt, static, expand, col_major = _view_plan(spec)
    opts = dict(static)
    for name, t in tensors.items():
        if t is not None:
            opts[name] = t
    return (fmt, opts), expand, col_major


def _as_promised(q: QuantizedTensor, plan, backend: str) -> QuantizedTensor:
    """A dispatched view in the layout the op's fake promises: FP8 1×128 scales column-major
    (``op_specs.col_major_like``), and expanded where the spec asks (:func:`_expanded`)."""
    _, expand, col_major = plan
    if col_major and q.scale.dim() == 2:
        q = dataclasses.replace(q, scale=col_major_like(q.scale))
    return _expanded(q, expand, backend)


# ============================================================================ the ops
def _expanded(q: QuantizedTensor | None, want: bool, backend: str):
    """``q`` in the expanded form when ``want`` (bf16 ``value · block_scale``, tensor.py): as
    the quantizer returned it if it wrote that form itself, else decoded now (one pass)."""
    if q is None or not want or q.expanded:
        return q
    return dispatch("expand", q.fmt.value, backend, q.device, QuantizedTensor.expand, q)


def _shares_col_amax(row: tuple | None, col: tuple | None) -> bool:
    """Whether ``quantize_rowcol``'s column view takes the row view's amax, for two views
    ``(format, options)`` (``CONFIG["SHARE_COL_AMAX"]``; the op then returns an empty column
    amax, its fake too, and :func:`quantize_views` hands the row view's to both)."""
    if not CONFIG["SHARE_COL_AMAX"] or row is None or col is None:
        return False
    for fmt, options in (row, col):     # plain tests: torch 2.11's dynamo traces no bool(tuple)
        if fmt not in _SHARED_AMAX_FORMATS or options.get("rht", False):
            return False
    return True


def _shares_col_amax_specs(row: str, col: str) -> bool:
    """:func:`_shares_col_amax` of two view specs (the op's and its fake's arguments)."""
    return bool(row and col) and _shares_col_amax(
        *((p[0], dict(p[1])) for p in (_view_plan(row), _view_plan(col))))


def _quantize_op(x: Tensor, spec: str, backend: str, seed: Optional[Tensor],
                 rand_bits: Optional[Tensor], amax: Optional[Tensor],
                 scale: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    plan = _view_options(spec, seed=seed, rand_bits=rand_bits, amax=amax, scale=scale)
    fmt, opts = plan[0]
    q = dispatch("quantize", fmt.value, backend, x.device, reference_quantizer(fmt), x, **opts)
    q = _as_promised(q, plan, backend)
    return _fresh((q.data, q.scale, q.amax), (x, seed, rand_bits, amax, scale))


def _fake_view(x: Tensor, spec: str, rows, cols) -> tuple[Tensor, Tensor, Tensor]:
    fmt, opts = parse_view_spec(spec)
    if opts.get("amax_only"):
        return (*_no_view(x)[:2], x.new_empty((), dtype=torch.float32))
    (d_shape, d_dtype), (s_shape, s_dtype) = _layout(fmt, opts, rows, cols)
    scale = x.new_empty(s_shape[::-1], dtype=s_dtype).t() if scale_col_major(fmt, opts) \
        else x.new_empty(s_shape, dtype=s_dtype)
    return x.new_empty(d_shape, dtype=d_dtype), scale, x.new_empty((), dtype=torch.float32)


_define("quantize(Tensor x, str spec, str backend, Tensor? seed, Tensor? rand_bits, "
        "Tensor? amax, Tensor? scale) -> (Tensor, Tensor, Tensor)", _quantize_op)


@_fake("quantize")
def _(x, spec, backend, seed, rand_bits, amax, scale):
    return _fake_view(x, spec, *_rows_cols(x))


def _quantize_rowcol_op(x: Tensor, row: str, col: str, backend: str, seed: Optional[Tensor],
                        row_rand_bits: Optional[Tensor], col_rand_bits: Optional[Tensor],
                        row_amax: Optional[Tensor], col_amax: Optional[Tensor],
                        row_scale: Optional[Tensor], col_scale: Optional[Tensor],
                        prologue: str = "", x2: Optional[Tensor] = None) -> list[Tensor]:
    plans = [_view_options(row, seed=seed, rand_bits=row_rand_bits, amax=row_amax,
                           scale=row_scale) if row else None,
             _view_options(col, seed=seed, rand_bits=col_rand_bits, amax=col_amax,
                           scale=col_scale) if col else None]
    amax_view = amax_only_view(*plans[1][0], plans[1][1]) if plans[1] else None
    if amax_view is not None:
        plans[1] = None
    views = [p[0] if p else None for p in plans]
    expand = tuple(bool(p and p[1]) for p in plans)
    key = rowcol_key(*(v[0].value if v else None for v in views))
    x_in = x
    hints = {"expand": expand} if any(expand) else {}
    reference = rowcol_reference
    if prologue:                 # op(x, x2): fused into a kernel's loads, or computed first
        check_prologue(prologue, x, x2)
        if kernel_takes_hint("quantize_rowcol", key, backend, x.device, "prologue"):
            hints["prologue"] = (prologue, x2)
            reference = functools.partial(_rowcol_reference_of, prologue, x2)
        else:
            x = apply_prologue(prologue, x, x2)
    if amax_view is not None and kernel_takes_hint("quantize_rowcol", key, backend, x.device,
                                                   "col_amax"):
        hints["col_amax"] = amax_view
    if wants_kernel(backend, x.device) and not has_kernel("quantize_rowcol", key):
        q_row, q_col = rowcol_views(x, *views, backend=backend)     # no fused kernel: per view
        note_path("quantize_rowcol", key, "per view (no fused kernel for this pair)")
    else:   # a kernel that takes the hint writes expanded views itself
        q_row, q_col = dispatch("quantize_rowcol", key, backend, x.device, reference, x,
                                *views, hints=hints or None)
    outs = []
    for q, p in ((q_row, plans[0]), (q_col, plans[1])):
        if p is None:
            outs += _no_view(x)
            continue
        q = _as_promised(q, p, backend)
        outs += [q.data, q.scale, q.amax]
    if amax_view is not None:          # the kernel's (it returns it as q_col), or measured now
        outs[5] = q_col if isinstance(q_col, Tensor) else amax_only_reference(
            apply_prologue(prologue, x, x2) if "prologue" in hints else x, amax_view)
        if not isinstance(q_col, Tensor) and wants_kernel(backend, x.device):
            note_path("quantize_rowcol", key, explain()[("quantize_rowcol", key)]
                      + "; the column view's amax alone by the reference (a pass of its own)")
    if _shares_col_amax_specs(row, col):
        outs[5] = x.new_empty(0, dtype=torch.float32)
    inputs = (x_in, seed, row_rand_bits, col_rand_bits, row_amax, col_amax, row_scale,
              col_scale, x2)
    return list(_fresh(outs, inputs))


def _no_view(x: Tensor) -> list[Tensor]:
    """An unrequested view's three outputs (empty tensors)."""
    return [x.new_empty(0, dtype=torch.uint8) for _ in range(3)]


def _rowcol_reference_of(prologue: str, x2: Optional[Tensor], x: Tensor, row, col):
    """The reference's views of ``op(x, x2)`` (a fused kernel's twin, and its fallback)."""
    return rowcol_reference(apply_prologue(prologue, x, x2), row, col)


_define("quantize_rowcol(Tensor x, str row, str col, str backend, Tensor? seed, "
        "Tensor? row_rand_bits, Tensor? col_rand_bits, Tensor? row_amax, Tensor? col_amax, "
        "Tensor? row_scale, Tensor? col_scale, str prologue=\"\", Tensor? x2=None) -> Tensor[]",
        _quantize_rowcol_op)


@_fake("quantize_rowcol")
def _(x, row, col, backend, seed, row_rand_bits, col_rand_bits, row_amax, col_amax, row_scale,
      col_scale, prologue="", x2=None):
    rows, cols = _rows_cols(x)
    outs = []
    for spec, shape in ((row, (rows, cols)), (col, (cols, rows))):
        outs += list(_fake_view(x, spec, *shape)) if spec else _no_view(x)
    if _shares_col_amax_specs(row, col):
        outs[5] = x.new_empty(0, dtype=torch.float32)
    return outs


def _delayed_scaling_update_impl(amax_history: Tensor, scale: Tensor, amax: Tensor,
                                 fp8_max: float, margin: int) -> None:
    """:func:`microscale.quant.fp8.delayed_scale_update_` as an op (mutates its first two)."""
    delayed_scale_update_(amax_history, scale, amax, fp8_max, margin)


_define("delayed_scaling_update_(Tensor(a!) amax_history, Tensor(b!) scale, Tensor amax, "
        "float fp8_max, SymInt margin) -> ()", _delayed_scaling_update_impl)
delayed_scaling_update_ = torch.ops.microscale.delayed_scaling_update_.default


@_fake("delayed_scaling_update_")
def _(amax_history, scale, amax, fp8_max, margin):
    return None


# ============================================================================ Python entry points
def _seed_for(options: dict, device: torch.device) -> Optional[Tensor]:
    """The SR seed for one call: given, or drawn from the view's generator when SR needs one."""
    if options.get("seed") is not None:
        return options["seed"]
    gen = check_generator(options.get("generator"), device)
    if options.get("stochastic") and options.get("rand_bits") is None:
        return draw_seed(gen, device)
    return None


def _pack(fmt: QFormat, opts: dict, tensors, shape, orig_dtype) -> QuantizedTensor:
    data, scale, amax = tensors
    rows, cols = data.shape[0], shape[-1] if len(shape) else 1
    return QuantizedTensor(fmt=fmt, data=data, scale=scale, amax=amax, shape=shape,
                           orig_dtype=orig_dtype, **_meta(fmt, opts, rows, cols))


def quantize_view(x: Tensor, fmt: QFormat, options: dict, backend: str) -> QuantizedTensor:
    """One quantized view of ``x`` through ``microscale::quantize``."""
    seed = _seed_for(options, x.device)
    out = torch.ops.microscale.quantize(
        x.detach(), view_spec(fmt, options), backend, seed, options.get("rand_bits"),
        options.get("amax"), options.get("scale"))
    return _pack(fmt, options, out, x.shape, x.dtype)


def quantize_views(x: Tensor, row: tuple | None, col: tuple | None, backend: str,
                   prologue: str = "", x2: Tensor | None = None):
    """Row and column views of ``x`` (``(fmt, options)`` or None each) in one op call; with a
    ``prologue`` (``op_specs.PROLOGUES``), of ``op(x, x2)``, bit for bit. A column view with
    the option ``amax_only`` (NVFP4) comes back as its fp32 amax alone, measured in the pass
    that measures the row view's."""
    opts = [v[1] if v else {} for v in (row, col)]
    seed = _seed_for(opts[0], x.device) if row else None
    if seed is None and col:
        seed = _seed_for(opts[1], x.device)
    out = torch.ops.microscale.quantize_rowcol(
        x.detach(), view_spec(*row) if row else "", view_spec(*col) if col else "", backend, seed,
        opts[0].get("rand_bits"), opts[1].get("rand_bits"), opts[0].get("amax"),
        opts[1].get("amax"), opts[0].get("scale"), opts[1].get("scale"), prologue,
        None if x2 is None else x2.detach())
    rows, cols = _rows_cols(x)
    if _shares_col_amax(row, col):
        out = [*out[:5], out[2]]                # the column view's amax is the row view's
    q_row = _pack(row[0], opts[0], out[:3], torch.Size((rows, cols)), x.dtype) if row else None
    if col and opts[1].get("amax_only"):
        return q_row, out[5]                    # the column view's amax alone
    q_col = _pack(col[0], opts[1], out[3:], torch.Size((cols, rows)), x.dtype) if col else None
    return q_row, q_col


# the GEMM ops (scaled_mm, expand, hp_mm) and their entry points, in a module of their own
from .ops_gemm import expand, hp_mm, mm  # noqa: E402,F401  (re-exported)
