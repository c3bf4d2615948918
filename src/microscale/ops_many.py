"""Many tensors' row + column views in one op call (the weights of a model, once a step).

The op (namespace ``microscale``)::

    quantize_rowcol_many(xs: Tensor[], row, col, backend)
        -> [codes_row, scales_row, codes_col, scales_col, amax [n]]

Each tensor ``xs[i]`` ``[rows_i, cols_i]`` gets what ``quantize_rowcol(xs[i], row, col)``
gives it; the outputs are flat, tensor after tensor in list order (offsets from the shapes,
:func:`flat_offsets`), so that one kernel writes them all and no
two outputs of the op alias. :func:`quantize_views_many` cuts them into
:class:`~microscale.tensor.QuantizedTensor` pairs (views, no copies).

What it serves: FP8 128×128 weight pairs (``fp8_blockwise``: W for fprop and its exact
transpose for dgrad), quantized once per optimizer step by :func:`microscale.weight_cache`
in one launch (:mod:`microscale.kernels.quant_many`) instead of one per weight. The reference
is ``quantize_rowcol`` tensor by tensor; :func:`many_supported` says which views it takes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .backend import dispatch, rowcol_key
from .ops import _define, _fake, _pack, parse_view_spec, rowcol_reference, view_spec
from .tensor import QFormat

__all__ = ["quantize_views_many", "many_supported", "rowcol_many_reference", "flat_offsets"]


def flat_offsets(shapes, block: tuple[int, int]) -> tuple[list[int], list[int], int, int]:
    """Offsets of each ``[rows, cols]`` tensor's codes and scales in the flat outputs, and the
    two totals (codes, scales)."""
    q_offs, s_offs, q, s = [], [], 0, 0
    for rows, cols in shapes:
        q_offs.append(q)
        s_offs.append(s)
        q += rows * cols
        s += (rows // block[0]) * (cols // block[1])
    return q_offs, s_offs, q, s


def many_supported(row, col, shape) -> bool:
    """Whether ``(row, col)`` views of a ``shape`` tensor can go through the many-tensor op:
    FP8 128×128 both ways with the same options, whole tiles."""
    if row is None or col is None or row[0] != QFormat.FP8_BLOCK or row != col:
        return False
    opts = row[1]
    return tuple(opts.get("block", (1, 128))) == (128, 128) and len(shape) == 2 \
        and shape[0] % 128 == 0 and shape[1] % 128 == 0 and not opts.get("scale") \
        and not opts.get("amax")


def rowcol_many_reference(xs: list[Tensor], row, col) -> list[Tensor]:
    """The spec: ``quantize_rowcol`` per tensor, flattened and concatenated."""
    pairs = [rowcol_reference(x, row, col) for x in xs]
    out = [torch.cat([getattr(q[v], name).reshape(-1) for q in pairs])
           for v in (0, 1) for name in ("data", "scale")]
    return out + [torch.stack([q[0].amax.reshape(()) for q in pairs])]


def _many_op(xs: list[Tensor], row: str, col: str, backend: str) -> list[Tensor]:
    views = [parse_view_spec(row), parse_view_spec(col)]
    key = rowcol_key(views[0][0].value, views[1][0].value)
    return list(dispatch("quantize_rowcol_many", key, backend, xs[0].device,
                         rowcol_many_reference, xs, *views))


_define("quantize_rowcol_many(Tensor[] xs, str row, str col, str backend) -> Tensor[]", _many_op)


@_fake("quantize_rowcol_many")
def _(xs, row, col, backend):
    fmt, opts = parse_view_spec(row)
    fp8 = opts.get("fp8_dtype", torch.float8_e4m3fn)
    _, _, nq, ns = flat_offsets([x.shape for x in xs], (128, 128))
    x0 = xs[0]
    return [x0.new_empty(nq, dtype=fp8), x0.new_empty(ns, dtype=torch.float32),
            x0.new_empty(nq, dtype=fp8), x0.new_empty(ns, dtype=torch.float32),
            x0.new_empty(len(xs), dtype=torch.float32)]


def quantize_views_many(xs: list[Tensor], row: tuple, col: tuple, backend: str):
    """``[(q_row, q_col)]`` of every tensor (each as ``quantize_views(x, row, col)``) from one
    op call; every shape must pass :func:`many_supported`."""
    for x in xs:
        if not many_supported(row, col, x.shape):
            raise ValueError(f"quantize_views_many: views {row[0].value} / {col[0].value} of a "
                             f"{tuple(x.shape)} tensor are not supported (FP8 128x128 pairs of "
                             "whole tiles only)")
    qr, sr, qc, sc, amax = torch.ops.microscale.quantize_rowcol_many(
        [x.detach() for x in xs], view_spec(*row), view_spec(*col), backend)
    q_offs, s_offs, _, _ = flat_offsets([x.shape for x in xs], (128, 128))
    out = []
    for i, (x, q_at, s_at) in enumerate(zip(xs, q_offs, s_offs)):
        rows, cols = x.shape
        nq, ns = rows * cols, (rows // 128) * (cols // 128)
        a = amax[i]
        q_row = _pack(row[0], row[1], (qr[q_at:q_at + nq].view(rows, cols),
                                       sr[s_at:s_at + ns].view(rows // 128, cols // 128), a),
                      torch.Size((rows, cols)), x.dtype)
        q_col = _pack(col[0], col[1], (qc[q_at:q_at + nq].view(cols, rows),
                                       sc[s_at:s_at + ns].view(cols // 128, rows // 128), a),
                      torch.Size((cols, rows)), x.dtype)
        out.append((q_row, q_col))
    return out
