"""The reference (the spec) of the grouped ops in :mod:`microscale.ops_grouped`.

Each op's reference loops over the experts, reading the group sizes on the host
(``offs.tolist()``, a host sync: acceptable in the reference only):

* ``quantize_grouped``: each expert's tokens zero-padded to ``multiple`` and quantized alone by
  the per-tensor reference quantizers, exactly as ``ms.Linear`` does (padding, seeds), written
  into the grouped row view and the padded column view (:mod:`microscale.quant.grouped`);
* ``grouped_scaled_mm`` / ``grouped_scaled_mm_out``: one fp32 matmul per expert of the
  operands' ``value · block scale`` (:func:`partial_values`), the ``_out`` form times each
  expert's factor and rounded once.

The operand helpers (:func:`as_quantized`, :func:`partial_values`, ``_as_2d``) and
:data:`REDUCE_ALIGN` are shared with the sync-free path (:mod:`microscale.kernels.grouped`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .ops import _layout, reference_quantizer
from .quant.fp8 import fp8_scale_from_amax
from .quant.grouped import group_layout
from .tensor import QFormat, QuantizedTensor

__all__ = [
    "REDUCE_ALIGN",
    "as_quantized",
    "grouped_mm_out_reference",
    "grouped_mm_reference",
    "partial_values",
    "quantize_grouped_reference",
]


# "reduce" groups end at multiples of this (the padded column layout pads each expert's tokens
# to nn.grouped.token_multiple, a multiple of 16): the sync-free GEMM loads K in vectors on it
REDUCE_ALIGN = 16


def _view_out(fmt, opts, rows, cols, n, like: Tensor):
    (d_shape, d_dtype), (s_shape, s_dtype) = _layout(fmt, opts, rows, cols)
    if fmt == QFormat.FP8_TENSOR:
        s_shape = (n,)
    # the padding past the last expert is an all-zero block: FP8 blockwise gives it
    # scale_inv 1 (scale 1 for amax 0), every other format a zero scale byte
    fill = 1.0 if fmt == QFormat.FP8_BLOCK else 0.0
    return (like.new_zeros(d_shape, dtype=d_dtype),
            torch.full(s_shape, fill, dtype=s_dtype, device=like.device),
            like.new_zeros((n,), dtype=torch.float32))


def _empty_tensor_scale(opts, given: Tensor | None, e: int, like: Tensor) -> Tensor:
    """An expert with no tokens: FP8 tensorwise's scale_inv from amax 0 (or the given scale)."""
    if given is not None:
        return 1.0 / given.reshape(-1)[e].float()
    zero = torch.zeros((), device=like.device)
    return 1.0 / fp8_scale_from_amax(zero, opts.get("fp8_dtype", torch.float8_e4m3fn),
                                     opts.get("pow2_scales", False), like.dtype)


def _ref_view(x_e, fmt, opts, seed, bits, scale):
    opts = dict(opts, check_finite=False)
    if opts.pop("expand", False):          # the expanded form: bf16 value · block scale
        return _ref_view(x_e, fmt, opts, seed, bits, scale).expand()
    if opts.get("stochastic"):
        if bits is not None:
            opts["rand_bits"] = bits.contiguous()
        else:
            opts["seed"] = seed
    if scale is not None:
        opts["scale"] = scale
    return reference_quantizer(fmt)(x_e, **opts)


def _store(out, q, fmt, e, rows: slice | None, cols: slice | None, n_rows=None):
    """Write expert e's quantized view into the grouped outputs (rows of the row view, or the
    column range of the padded column view)."""
    data, scale, amax = out
    if rows is not None:
        data[rows] = q.data[:n_rows]
        if fmt != QFormat.FP8_TENSOR:
            scale[rows] = q.scale[:n_rows]
    else:
        per_d = 2 if fmt.is_fp4 and not q.expanded else 1
        data[:, cols.start // per_d: cols.stop // per_d] = q.data
        if fmt != QFormat.FP8_TENSOR:
            bc = q.block[1]
            scale[:, cols.start // bc: cols.stop // bc] = q.scale
    if fmt == QFormat.FP8_TENSOR:
        scale[e] = q.scale
    if fmt in (QFormat.NVFP4, QFormat.FP8_TENSOR):
        amax[e] = q.amax


def quantize_grouped_reference(x, offs, row, col, multiple, seeds, row_bits, col_bits,
                               row_scale, col_scale, backend: str = "reference"):
    """The spec: each expert's tokens zero-padded to ``multiple`` and quantized alone by the
    reference quantizers (``backend`` is the caller's; the reference ignores it)."""
    lay = group_layout(offs, x.shape[0], multiple)
    T, K, n = x.shape[0], x.shape[1], offs.shape[0]
    ends = offs.tolist()                    # host sync: the reference only
    outs = [_view_out(*row, T, K, n, x) if row else None,
            _view_out(*col, K, lay.bound, n, x) if col else None]
    start, pstart = 0, 0
    for e, end in enumerate(ends):
        count = end - start
        padded = -(-count // multiple) * multiple
        if count == 0:
            for view, out, given in ((row, outs[0], row_scale), (col, outs[1], col_scale)):
                if view and view[0] == QFormat.FP8_TENSOR:
                    out[1][e] = _empty_tensor_scale(view[1], given, e, x)
            continue
        x_e = F.pad(x[start:end], (0, 0, 0, padded - count))
        seed = None if seeds is None else seeds.reshape(-1)[e:e + 1]
        if row:
            bits = None if row_bits is None else F.pad(row_bits[start:end], (0, 0, 0, padded - count))
            q = _ref_view(x_e, *row, seed, bits, None if row_scale is None else row_scale[e])
            _store(outs[0], q, row[0], e, slice(start, end), None, count)
        if col:
            bits = None if col_bits is None else col_bits[:, pstart:pstart + padded]
            q = _ref_view(x_e.t().contiguous(), *col, None if seed is None else seed + 1, bits,
                          None if col_scale is None else col_scale[e])
            _store(outs[1], q, col[0], e, None, slice(pstart, pstart + padded))
        start, pstart = end, pstart + padded
    return outs


# ============================================================================ GEMM
def as_quantized(data: Tensor, scale: Tensor, spec: str) -> QuantizedTensor:
    """A 2-D grouped operand as a QuantizedTensor (amax unused: per-expert factors are
    applied outside the GEMM)."""
    name, br, bc, _ = spec.split(",")
    fmt = QFormat(name)
    rows, cols = data.shape[0], data.shape[1] * (2 if fmt.is_fp4 else 1)
    block = (rows, cols) if fmt == QFormat.FP8_TENSOR else (int(br), int(bc))
    return QuantizedTensor(fmt=fmt, data=data, scale=scale, amax=scale.new_zeros(()),
                           shape=torch.Size((rows, cols)), orig_dtype=torch.float32, block=block)


def partial_values(data: Tensor, scale: Tensor, spec: str) -> Tensor:
    """fp32 ``value · block scale`` of a 2-D operand (FP8 tensorwise: the values alone). bf16
    data is an expanded view (``"expand"``), those values already."""
    if data.dtype == torch.bfloat16:
        return data.float()
    q = as_quantized(data, scale, spec)
    return q.values() if q.fmt == QFormat.FP8_TENSOR else q.values() * q.block_scales()


def _as_2d(data: Tensor, scale: Tensor, spec: str) -> tuple[Tensor, Tensor]:
    """A stacked ``[E, N, ...]`` expert operand as one ``[E·N, ...]`` operand."""
    if data.dim() == 2:
        return data, scale
    data2 = data.reshape(-1, data.shape[-1])
    if spec.startswith(QFormat.FP8_TENSOR.value):
        return data2, scale
    return data2, scale.reshape(-1, scale.shape[-1])


def grouped_mm_reference(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode,
                         backend: str = "reference"):
    """The spec: one fp32 matmul per expert (group sizes read on the host)."""
    pa = partial_values(*_as_2d(a_data, a_scale, a_spec), a_spec)
    pb = partial_values(*_as_2d(b_data, b_scale, b_spec), b_spec)
    ends, start = offs.tolist(), 0          # host sync: the reference only
    n = len(ends)
    if mode == "reduce" and any(end % REDUCE_ALIGN for end in ends):
        raise ValueError(f"grouped_scaled_mm: 'reduce' groups (the padded column layout's ends) "
                         f"must end at multiples of {REDUCE_ALIGN}, got {ends}")
    if mode == "tokens":
        pb = pb.reshape(n, -1, pb.shape[-1])
        y = pa.new_zeros((pa.shape[0], pb.shape[1]))
        for e, end in enumerate(ends):
            y[start:end] = pa[start:end] @ pb[e].t()
            start = end
        return y
    y = pa.new_zeros((n, pa.shape[0], pb.shape[0]))
    for e, end in enumerate(ends):
        y[e] = pa[:, start:end] @ pb[:, start:end].t()
        start = end
    return y


def grouped_mm_out_reference(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, factor,
                             out_dtype, backend: str = "reference"):
    """The "tokens" GEMM with its epilogue: each expert's fp32 rows times its factor
    (``factor [E]``), then one rounding to ``out_dtype``; rows past the last group are zeros."""
    y = grouped_mm_reference(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, "tokens")
    start = 0
    for e, end in enumerate(offs.tolist()):       # host sync: the reference only
        y[start:end] *= factor[e].float()
        start = end
    return y.to(out_dtype)
