"""The sync-free grouped (MoE) path: the ``quantize_grouped`` and ``grouped_scaled_mm`` ops with
no host synchronisation, for CUDA tensors (and ``backend="triton"`` anywhere).

Quantization (:func:`quantize_grouped_fast`): NVFP4 token views (1x16 blocks, the column view
with the 16-point RHT or none) go to ``quant_nvfp4_grouped_reg``: one launch builds the group
layout from ``offs``, one amax pass measures both views per expert, one quantize pass (two for
a stochastically rounded row view beside the column view) loads x's rows straight into the
padded column layout, and stochastic rounding draws in-kernel Philox keyed by each expert's
seed (every expert's codes are those the dense kernels give its tokens alone; given bytes,
those are used). Other views: group positions come from ``offs`` by device ops
(:func:`microscale.quant.grouped.group_layout`); the row view is quantized in place, the column
view from the padded layout ``x_pad [bound, K]`` built by one gathering pass. Per view there
is one quantizer call: formats whose scales are all per block (MXFP8, MXFP4, FP8 blockwise) go
through the per-tensor Triton kernels (their blocks never cross an expert, so one launch over
the whole matrix quantizes every expert exactly as alone); NVFP4 views the register kernels do
not take (a row view with the RHT; ``CONFIG["NVFP4_REG"]`` off) go through the older
``quant_nvfp4_grouped`` (an amax pass with one atomic max per expert, then the per-tensor
kernel's block arithmetic with each expert's global scale); FP8 tensorwise (and NVFP4 with 2D
tiles or another RHT size) compute the per-expert amax with a segment max and run the
reference arithmetic with it broadcast (PyTorch ops). Their stochastic rounding bytes come
from ``sr_bytes_grouped`` (one pass, the hash of ``quant.grouped.segment_rand_bits``).

GEMMs (:func:`grouped_mm_fast`, :func:`grouped_mm_out_fast`): ``grouped_mm.py``.
"""

from __future__ import annotations

import os

import torch

from ..backend import (
    KernelUnsupported,
    _interpreting,
    dispatch,
    mm_key,
    note_path,
    register_kernel,
    rowcol_key,
)
from ..ops import reference_quantizer
from ..ops_grouped import _spec
from ..quant.grouped import group_layout, quantize_segments, segment_sr_bytes
from ..tensor import QFormat
from .grouped_mm import grouped_mm_fast, grouped_mm_out_fast, partial_values_fast

__all__ = ["grouped_mm_fast", "quantize_grouped_fast"]


def _block_fn(fmt: QFormat, backend: str):
    """The per-tensor quantize dispatch (Triton kernel on CUDA) for a block-scaled format."""
    def run(x2, **opts):
        return dispatch("quantize", fmt.value, backend, x2.device, reference_quantizer(fmt), x2,
                        **opts)
    return run


# PAIR: an FP8 1x128 or MXFP8 row + column pair from one row + column kernel call on the
# padded matrix (quant_rowcol_reg: x_pad read once), the row view gathered back to the token
# rows (1 byte a code), instead of a row pass over x, a transposing copy of x_pad and a column
# pass: ~10 bytes moved per element instead of ~16. Bit-identical (tested). The default since
# session 9 timed it (H100, graph-replayed fwd+bwd at the DeepSeek-V3 and Qwen3 shapes: 9-19%
# faster for FP8 1x128 and MXFP8; benchmarks/results/h100_20261125_session9/);
# MICROSCALE_GROUPED_PAIR=0 or CONFIG["PAIR"] = False turns it off.
# NVFP4_REG: NVFP4 token views through quant_nvfp4_grouped_reg (above). Session 17 (H100,
# graph-replayed, moe-1b's pairs at 32768 routed rows, bench_grouped_sweep.py --pairs): x pair
# 0.378 -> 0.204 ms, dy pair (K 1536) 0.763 -> 0.368 ms against the older kernels; moe-1b
# nvfp4 step 0.579x -> 0.654x of bf16 (call 5). MICROSCALE_GROUPED_NVFP4_REG=0 turns it off.
# GATHER: the FP8 1x128 pair's kernel reads the tokens through the padded layout's row map and
# writes the row view at the token rows (quant_fp8.pair_gathered): no padded copy of x and no
# gather of the row view (at DeepSeek-V3's x [32768, 7168]: ~1.4 GB less traffic a pair).
# Session 23; MICROSCALE_GROUPED_GATHER=0 turns it off.
CONFIG = {"PAIR": os.environ.get("MICROSCALE_GROUPED_PAIR", "1") == "1",
          "NVFP4_REG": os.environ.get("MICROSCALE_GROUPED_NVFP4_REG", "1") == "1",
          "GATHER": os.environ.get("MICROSCALE_GROUPED_GATHER", "1") == "1"}
_PAIR_FORMATS = (QFormat.FP8_BLOCK, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2)


def quantize_grouped_fast(x, offs, row, col, multiple, seeds, row_bits, col_bits, row_scale,
                          col_scale, backend: str = "auto"):
    """Same outputs as ``ops_grouped.quantize_grouped_reference``, without reading ``offs``."""
    key = rowcol_key(row and row[0].value, col and col[0].value)
    want = [bool(v and v[1].get("expand")) for v in (row, col)]
    row, col = [(v[0], {k: o for k, o in v[1].items() if k != "expand"}) if v else v
                for v in (row, col)]
    return [_expanded(q, v, w) for q, v, w in zip(
        _quantize_views(x, offs, row, col, multiple, seeds, row_bits, col_bits, row_scale,
                        col_scale, backend, key, tuple(want)), (row, col), want)]


def _expanded(q, view, want: bool):
    """A view's ``(data, scale, amax)`` with bf16 ``value · block scale`` data where asked
    (``"expand"``) and the quantizer wrote codes (a decode pass,
    :func:`grouped_mm.partial_values_fast`)."""
    if q is None or not want or q[0].dtype == torch.bfloat16:
        return q
    return (partial_values_fast(q[0], q[1], _spec(*view)).to(torch.bfloat16), q[1], q[2])


def _quantize_views(x, offs, row, col, multiple, seeds, row_bits, col_bits, row_scale,
                    col_scale, backend, key, expand: tuple[bool, bool]):
    """:func:`quantize_grouped_fast`'s views (no ``"expand"`` option left); ``expand``: the
    views asked for expanded, which the NVFP4 register kernels (row view) and the pair call's
    kernel (``quant_mx``'s MXFP8 register pair) write so themselves."""
    nv = _nvfp4_reg_views(x, offs, multiple, row, col, seeds, row_bits, col_bits, expand[0])
    rest = [v if nv[k] is None else None for k, v in enumerate((row, col))]
    if any(nv):
        note_path("quantize_grouped", key, "sync-free: NVFP4 views in the register layout "
                  "(quant_nvfp4_grouped_reg: layout, amax and quantize launches), in-kernel "
                  "Philox per expert" + ("; the other view one quantizer pass" if any(rest)
                                         else ""))
        if not any(rest):
            return nv
    row, col = rest
    lay = group_layout(offs, x.shape[0], multiple)
    if _pair_ok(row, col, x, lay):
        return _pair(x, lay, row, col, key, backend, expand)
    if not any(nv):
        note_path("quantize_grouped", key,
                  "sync-free: group layout on the device, one quantizer pass per view")
    outs = [None, None]
    if row:
        fmt, opts = row[0], dict(row[1], check_finite=False)
        args = (lay.row_groups(), lay.starts, lay.counts, "rows", seeds)
        _sr_bytes(opts, row_bits, args, tuple(x.shape), x.device)
        outs[0] = _nvfp4_fused(x, opts, *args, col=False) if _fused_ok(fmt, opts, x) else \
            quantize_segments(x, fmt, opts, *args, row_scale, _block_fn(fmt, backend))
    if col:
        fmt, opts = col[0], dict(col[1], check_finite=False)
        groups = lay.col_groups()
        x_pad = _pad(x, lay, groups)
        args = (groups, lay.pad_starts, lay.pad_counts, "cols",
                None if seeds is None else seeds + 1)
        _sr_bytes(opts, col_bits, args, (x.shape[1], lay.bound), x.device)
        outs[1] = _nvfp4_fused(x_pad, opts, *args, col=True) if _fused_ok(fmt, opts, x) else \
            quantize_segments(x_pad.t().contiguous(), fmt, opts, *args, col_scale,
                              _block_fn(fmt, backend))
    return [nv[k] or outs[k] for k in range(2)]


def _nvfp4_reg_views(x, offs, multiple: int, row, col, seeds, row_bits, col_bits,
                     expand_row: bool = False):
    """The NVFP4 views ``quant_nvfp4_grouped_reg`` takes (:func:`~microscale.kernels.
    quant_nvfp4_grouped_reg.nvfp4_reg_views`) among those :func:`_fused_ok` accepts (NVFP4
    1x16, RHT 16 or none, CUDA or the interpreter), with ``CONFIG["NVFP4_REG"]`` on;
    ``[None, None]`` where it takes none."""
    row, col = [v if v and _fused_ok(v[0], v[1], x) else None for v in (row, col)]
    if not CONFIG["NVFP4_REG"] or not (row or col):
        return [None, None]
    from .quant_nvfp4_grouped_reg import nvfp4_reg_views
    return nvfp4_reg_views(x, offs, multiple, row, col, seeds, row_bits, col_bits, expand_row)


def _pair_ok(row, col, x, lay) -> bool:
    """Views :func:`_pair` takes: block-scaled FP8/MXFP8 both ways, round-to-nearest, the
    padded matrix in whole column blocks (``bound``: a multiple of 128 for FP8 1x128, of 32
    for MX, where the row + column dispatch picks the MX kernel for partial 128-tiles)."""
    if not (CONFIG["PAIR"] and row and col and row[0] in _PAIR_FORMATS and col[0] in _PAIR_FORMATS):
        return False
    if (row[0] == QFormat.FP8_BLOCK) != (col[0] == QFormat.FP8_BLOCK):
        return False
    if any(v[1].get("stochastic") or v[1].get("rht") for v in (row, col)):
        return False
    rows = 128 if row[0] == QFormat.FP8_BLOCK else 32
    return x.shape[1] % 128 == 0 and lay.bound % rows == 0 and x.shape[0] > 0


def _pair(x, lay, row, col, key: str, backend: str, expand=(False, False)):
    """Both views from one ``quantize_rowcol`` dispatch on ``x_pad``; the row view's codes and
    scales gathered at the token rows. Scales come back row-major, as the grouped op's layout
    says (an FP8 1x128 pair's column-major scales are made contiguous: a few KB). ``expand``:
    passed on as the dispatch hint (a kernel that takes it writes those views expanded; else
    :func:`_expanded` decodes them after)."""
    from ..ops import rowcol_reference
    views = [(v[0], dict(v[1], check_finite=False)) for v in (row, col)]
    zeros = torch.zeros(lay.n_groups, dtype=torch.float32, device=x.device)
    if CONFIG["GATHER"] and row[0] == QFormat.FP8_BLOCK:
        from .pad_grouped import source_rows
        from .quant_fp8 import pair_gathered
        try:
            (qr, sr), (qc, sc) = pair_gathered(x.contiguous(), source_rows(lay), lay.bound,
                                               row[1], col[1])
            note_path("quantize_grouped", key, "sync-free: one row + column kernel call "
                      "reading the tokens through the padded layout's row map (CONFIG["
                      "'GATHER']: no padded copy, no gather)")
            return [(qr, sr, zeros), (qc, sc, zeros.clone())]
        except KernelUnsupported:
            pass
    note_path("quantize_grouped", key, "sync-free: one row + column kernel call on the padded "
              "matrix, the row view gathered back (CONFIG['PAIR'])")
    rows = lay.padded_rows()
    q_row, q_col = dispatch("quantize_rowcol", key, backend, x.device, rowcol_reference,
                            _pad(x, lay), *views,
                            hints={"expand": tuple(expand)} if any(expand) else None)
    return [(q_row.data.index_select(0, rows), q_row.scale.index_select(0, rows).contiguous(),
             zeros), (q_col.data, q_col.scale.contiguous(), zeros.clone())]


def _pad(x: torch.Tensor, lay, groups: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` in the padded column layout: one gathering Triton pass (``pad_grouped``) where it
    runs (CUDA, the interpreter), else the PyTorch twin ``lay.pad``; the same bits.
    ``groups``: ``lay.col_groups()``, when the caller has it already."""
    if x.device.type == "cuda" or _interpreting():
        from .pad_grouped import pad_rows
        return pad_rows(x, lay, groups)
    return lay.pad(x)


def _sr_bytes(opts: dict, given, args, shape: tuple, device) -> None:
    """Put a stochastic view's SR bytes in ``opts["rand_bits"]``: the given ones, else made by
    ``sr_bytes_grouped`` (one pass; CUDA or the interpreter) or, elsewhere, left to the
    PyTorch twin inside ``quantize_segments``."""
    if given is not None:
        opts["rand_bits"] = given
    elif opts.get("stochastic") and (device.type == "cuda" or _interpreting()):
        from .sr_bytes_grouped import segment_sr_bytes_triton
        seg, starts, lengths, along, seeds = args
        if seeds is None:
            raise ValueError("stochastic rounding needs per-expert seeds")
        opts["rand_bits"] = segment_sr_bytes_triton(seg, starts, lengths, shape, along, seeds)


def _fused_ok(fmt: QFormat, opts: dict, x: torch.Tensor) -> bool:
    """NVFP4 views the fused per-expert-amax kernel takes (1×16 blocks, RHT 16 or none)."""
    return fmt == QFormat.NVFP4 and not opts.get("block_2d") and \
        int(opts.get("rht_d", 16)) == 16 and (x.device.type == "cuda" or _interpreting())


def _nvfp4_fused(src, opts, seg, starts, lengths, along, seeds, col: bool):
    """The NVFP4 view through ``quant_nvfp4_grouped`` (SR bytes as the PyTorch path's)."""
    from .quant_nvfp4_grouped import quantize_nvfp4_segments_triton
    bits = None
    if opts.get("stochastic"):
        shape = tuple(reversed(src.shape)) if col else tuple(src.shape)
        bits = opts.get("rand_bits")
        if bits is None:
            bits = segment_sr_bytes(seg, starts, lengths, shape, along, seeds)
    return quantize_nvfp4_segments_triton(src, seg, starts.shape[0], col,
                                          bool(opts.get("rht")), bits)


def _register() -> None:
    names = [None] + [f.value for f in QFormat]
    for r in names:
        for c in names:
            if r or c:
                register_kernel("quantize_grouped", rowcol_key(r, c))(quantize_grouped_fast)
    for a in names[1:]:
        for b in names[1:]:
            register_kernel("grouped_scaled_mm", mm_key(a, b))(grouped_mm_fast)
            register_kernel("grouped_scaled_mm_out", mm_key(a, b))(grouped_mm_out_fast)


_register()
