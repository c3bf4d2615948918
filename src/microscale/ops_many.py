"""Many tensors' row + column views in one op call (the weights of a model, once a step).

The op (namespace ``microscale``)::

    quantize_rowcol_many(xs: Tensor[], row, col, backend)
        -> [codes_row, scales_row, codes_col, scales_col, amax [n]]

Each tensor ``xs[i]`` ``[rows_i, cols_i]`` gets what ``quantize_rowcol(xs[i], row, col)``
gives it; the outputs are flat, tensor after tensor in list order (offsets from the shapes,
:func:`flat_offsets`), so that one kernel writes them all and no
two outputs of the op alias. :func:`quantize_views_many` cuts them into
:class:`~microscale.tensor.QuantizedTensor` pairs (views, no copies).

What it serves, once per optimizer step under :func:`microscale.weight_cache`, instead of
launches per weight:

* FP8 128×128 weight pairs (``fp8_blockwise``: W for fprop and its exact transpose for
  dgrad), in one launch (:mod:`microscale.kernels.quant_many`);
* NVFP4 16×16 weights (``nvfp4``): the quantized Wᵀ is the transpose of the quantized W
  (SPEC §3), so the op writes one view, W expanded (bf16 ``value · tile_scale``, what both
  Hopper GEMMs read), no column codes, and as the column scales Wᵀ's scale bytes (W's tile
  bytes transposed, ``tensor.transpose_tile_scales``); two launches, the amaxes then the
  views (:mod:`microscale.kernels.quant_many_nvfp4`). :func:`quantize_views_many` returns
  ``(W, Wᵀ)`` as that view and its transpose (a view of W's data with those scales).
* MXFP8 weights (``mxfp8``): W's row view and its column view (Wᵀ, 1×32 blocks along N) in
  one launch, as codes, or both expanded with the views' ``expand`` option (bf16 ``value ·
  2^k``, what the Hopper GEMMs would decode them to)
  (:mod:`microscale.kernels.quant_many_mx`).

The reference is ``quantize_rowcol`` tensor by tensor; :func:`many_supported` says which
views it takes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .backend import dispatch, rowcol_key
from .ops import _define, _fake, _pack, parse_view_spec, rowcol_reference, view_spec
from .tensor import QFormat, transpose_tile_scales

_EMPTY_COL = ""                      # the column view of a one-view (NVFP4 16x16) call

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
    FP8 128×128 both ways, or NVFP4 16×16 round-to-nearest both ways (one view serves), with
    the same options, whole tiles, the amax measured; or MXFP8 both ways with the same
    options (codes or both expanded), whole 128×128 tiles."""
    if row is None or col is None or row != col or len(shape) != 2:
        return False
    opts = row[1]
    if opts.get("scale") is not None or opts.get("amax") is not None:
        return False
    if row[0] == QFormat.NVFP4:
        return _nvfp4_one_view(row) and shape[0] % 16 == 0 and shape[1] % 16 == 0
    if row[0].is_mx8:
        return set(opts) <= {"scale_rounding", "check_finite", "expand"} \
            and shape[0] % 128 == 0 and shape[1] % 128 == 0
    return row[0] == QFormat.FP8_BLOCK and tuple(opts.get("block", (1, 128))) == (128, 128) \
        and shape[0] % 128 == 0 and shape[1] % 128 == 0


def _nvfp4_one_view(view) -> bool:
    """An NVFP4 view whose quantized transpose is the transpose of its quantization (SPEC §3:
    16×16 tiles, round-to-nearest, no RHT)."""
    opts = view[1]
    return view[0] == QFormat.NVFP4 and bool(opts.get("block_2d")) and not opts.get("rht") \
        and not opts.get("stochastic")


def _block_of(view) -> tuple[int, int]:
    """The flat outputs' scale granularity: one per 128×128 tile (FP8), one per row and 16
    columns (NVFP4's ``[rows, cols/16]`` scale bytes, a tile's byte on its 16 rows), one per
    1×32 block (MXFP8, either view)."""
    if view[0] == QFormat.NVFP4:
        return (1, 16)
    return (1, 32) if view[0].is_mx8 else (128, 128)


def rowcol_many_reference(xs: list[Tensor], row, col) -> list[Tensor]:
    """The spec: ``quantize_rowcol`` per tensor, flattened and concatenated (an absent column
    view: empty outputs; a view asked expanded: decoded to it, as ``quantize_rowcol`` does).
    An NVFP4 16×16 row view alone (``col`` None): its transpose's scale bytes as the column
    scales (``tensor.transpose_tile_scales``), what dgrad's Wᵀ carries."""
    base = [None if v is None else (v[0], {k: o for k, o in v[1].items() if k != "expand"})
            for v in (row, col)]
    pairs = [rowcol_reference(x, *base) for x in xs]
    expand = [v is not None and bool(v[1].get("expand")) for v in (row, col)]
    pairs = [tuple(q.expand() if e else q for q, e in zip(pair, expand)) for pair in pairs]
    out = []
    for v in (0, 1):
        for name in ("data", "scale"):
            parts = [getattr(q[v], name).reshape(-1) for q in pairs if q[v] is not None]
            out.append(torch.cat(parts) if parts else xs[0].new_empty(0, dtype=torch.uint8))
    if col is None and _nvfp4_one_view(row):
        out[3] = torch.cat([transpose_tile_scales(q[0].scale, 16).reshape(-1) for q in pairs])
    return out + [torch.stack([q[0].amax.reshape(()) for q in pairs])]


def _many_op(xs: list[Tensor], row: str, col: str, backend: str) -> list[Tensor]:
    views = [parse_view_spec(row), parse_view_spec(col) if col else None]
    key = rowcol_key(views[0][0].value, views[1] and views[1][0].value)
    return list(dispatch("quantize_rowcol_many", key, backend, xs[0].device,
                         rowcol_many_reference, xs, *views))


_define("quantize_rowcol_many(Tensor[] xs, str row, str col, str backend) -> Tensor[]", _many_op)


@_fake("quantize_rowcol_many")
def _(xs, row, col, backend):
    fmt, opts = parse_view_spec(row)
    _, _, nq, ns = flat_offsets([x.shape for x in xs], _block_of((fmt, opts)))
    x0 = xs[0]
    amax = x0.new_empty(len(xs), dtype=torch.float32)
    if fmt == QFormat.NVFP4:
        return [x0.new_empty(nq, dtype=torch.bfloat16),
                x0.new_empty(ns, dtype=torch.float8_e4m3fn),
                x0.new_empty(0, dtype=torch.uint8), x0.new_empty(ns, dtype=torch.float8_e4m3fn),
                amax]
    if fmt.is_mx8:
        codes = torch.bfloat16 if opts.get("expand") else (
            torch.float8_e4m3fn if fmt == QFormat.MXFP8_E4M3 else torch.float8_e5m2)
        return [x0.new_empty(nq, dtype=codes), x0.new_empty(ns, dtype=torch.uint8),
                x0.new_empty(nq, dtype=codes), x0.new_empty(ns, dtype=torch.uint8), amax]
    fp8 = opts.get("fp8_dtype", torch.float8_e4m3fn)
    return [x0.new_empty(nq, dtype=fp8), x0.new_empty(ns, dtype=torch.float32),
            x0.new_empty(nq, dtype=fp8), x0.new_empty(ns, dtype=torch.float32), amax]


def quantize_views_many(xs: list[Tensor], row: tuple, col: tuple, backend: str):
    """``[(q_row, q_col)]`` of every tensor (each as ``quantize_views(x, row, col)``) from one
    op call; every shape must pass :func:`many_supported`. NVFP4 16×16: ``q_row`` expanded
    and ``q_col`` its transpose (the same bits as quantizing Wᵀ, SPEC §3). MXFP8: the row and
    the column view, both expanded where the views' options say ``expand``."""
    for x in xs:
        if not many_supported(row, col, x.shape):
            raise ValueError(f"quantize_views_many: views {row[0].value} / {col[0].value} of a "
                             f"{tuple(x.shape)} tensor are not supported (FP8 128x128 pairs, "
                             "NVFP4 16x16 round-to-nearest views of whole tiles, or MXFP8 "
                             "pairs of whole 128x128 tiles only)")
    if row[0] == QFormat.NVFP4:
        return _nvfp4_views_many(xs, row, backend)
    qr, sr, qc, sc, amax = torch.ops.microscale.quantize_rowcol_many(
        [x.detach() for x in xs], view_spec(*row), view_spec(*col), backend)
    block = _block_of(row)
    q_offs, s_offs, _, _ = flat_offsets([x.shape for x in xs], block)
    out = []
    for i, (x, q_at, s_at) in enumerate(zip(xs, q_offs, s_offs)):
        rows, cols = x.shape
        nq, ns = rows * cols, (rows // block[0]) * (cols // block[1])
        # the column view quantizes Wᵀ [cols, rows] with the same block
        sr_shape = (rows // block[0], cols // block[1])
        sc_shape = (cols // block[0], rows // block[1])
        a = amax[i]
        q_row = _pack(row[0], row[1], (qr[q_at:q_at + nq].view(rows, cols),
                                       sr[s_at:s_at + ns].view(sr_shape), a),
                      torch.Size((rows, cols)), x.dtype)
        q_col = _pack(col[0], col[1], (qc[q_at:q_at + nq].view(cols, rows),
                                       sc[s_at:s_at + ns].view(sc_shape), a),
                      torch.Size((cols, rows)), x.dtype)
        out.append((q_row, q_col))
    return out


def _nvfp4_views_many(xs: list[Tensor], row: tuple, backend: str):
    """NVFP4 16×16 weights: one expanded view each from one op call, W and its transpose."""
    w_view = (row[0], {**row[1], "expand": True})
    q, s, _, s_t, amax = torch.ops.microscale.quantize_rowcol_many(
        [x.detach() for x in xs], view_spec(*w_view), _EMPTY_COL, backend)
    q_offs, s_offs, _, _ = flat_offsets([x.shape for x in xs], (1, 16))
    out = []
    for i, (x, q_at, s_at) in enumerate(zip(xs, q_offs, s_offs)):
        rows, cols = x.shape
        nq, ns = rows * cols, rows * (cols // 16)
        q_w = _pack(w_view[0], w_view[1], (q[q_at:q_at + nq].view(rows, cols),
                                           s[s_at:s_at + ns].view(rows, cols // 16), amax[i]),
                    torch.Size((rows, cols)), x.dtype)
        # Wᵀ (SPEC §3), its scale bytes written by the op
        out.append((q_w, q_w.t(s_t[s_at:s_at + ns].view(cols, rows // 16))))
    return out
