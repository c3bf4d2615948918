"""Grouped (MoE) quantization and GEMM as ``torch.library`` custom ops, beside :mod:`.ops`.

The ops (namespace ``microscale``), all shapes static, group sizes only on the device::

    quantize_grouped(x [T, K], offs [E], row, col, multiple, bound, backend, seeds [E],
                     row_rand_bits, col_rand_bits, row_scale [E], col_scale [E])
        -> row (data, scale, amax [E]) in x's layout [T, K]
         + col (data, scale, amax [E]) in the padded column layout [K, bound]
    grouped_scaled_mm(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode, backend)
        -> "tokens": a [T, K] by expert rows · b [E, N, K]        -> [T, N]    fp32
           "reduce": a [M, bound] · b [N, bound], groups along K  -> [E, M, N] fp32
    grouped_scaled_mm_out(..., offs, factor [E], out_dtype, backend)
        -> "tokens" with each expert's rows times its factor, in out_dtype (one rounding)
    delayed_scaling_update_grouped_(history [E, L], scale [E], amax [E], active [E], ...)

Layouts and the padded column view: :mod:`microscale.quant.grouped`. ``row``/``col`` are view
specs as in :mod:`.ops` (format + static options as JSON); ``seeds`` are the experts' SR seeds
for this tensor (the column view uses ``seed + 1``, as ``ms.Linear`` does).
``grouped_scaled_mm`` returns the sum of products of the *block*-scaled operands: the
per-expert factors (NVFP4's α, FP8 tensorwise's ``scale_inv`` product; :func:`grouped_factor`)
are applied by the caller in its graph, as :mod:`microscale.nn.function` does for ``ms.Linear``.

Two implementations per op, chosen by :func:`microscale.backend.dispatch`:

* the **reference** (the spec, :mod:`microscale.ops_grouped_reference`, re-exported here): a
  loop over experts that reads the group sizes on the host (``offs.tolist()``, a host sync:
  acceptable in the reference only) and quantizes each expert's tokens with the per-tensor
  reference quantizers, exactly as ``ms.Linear`` does (padding, seeds); its GEMM is one fp32
  matmul per expert;
* the **sync-free path** (:mod:`microscale.kernels.grouped`, used for CUDA tensors and for
  ``backend="triton"``): the same numbers from device-side index arithmetic, one quantizer call
  per view and one ``torch._grouped_mm`` per GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from .backend import dispatch, mm_key, rowcol_key
from .ops import (
    _fresh,
    _layout,
    parse_view_spec,
    view_spec,
)
# the references (private helpers re-exported too: every old import path works)
from .ops_grouped_reference import (  # noqa: F401
    REDUCE_ALIGN,
    _as_2d,
    _empty_tensor_scale,
    _ref_view,
    _store,
    _view_out,
    as_quantized,
    grouped_mm_out_reference,
    grouped_mm_reference,
    partial_values,
    quantize_grouped_reference,
)
from .quant.grouped import padded_bound
from .quant.nvfp4 import nvfp4_alpha, nvfp4_global_scales
from .tensor import QFormat

__all__ = [
    "GroupedQ",
    "REDUCE_ALIGN",
    "delayed_scaling_update_grouped_",
    "grouped_factor",
    "grouped_gemm",
    "grouped_gemm_out",
    "grouped_mm_compat",
    "grouped_mm_reference",
    "hp_grouped_mm",
    "partial_values",
    "quantize_grouped",
    "quantize_grouped_reference",
]


@dataclass(frozen=True)
class GroupedQ:
    """A grouped quantized operand: ``data``/``scale`` in the op's layout (FP8 tensorwise:
    ``scale`` is the per-expert ``scale_inv [E]``) and the per-expert ``amax [E]`` (zeros for
    the block-local formats, FP8 blockwise and MX, whose GEMMs take no per-tensor factor)."""

    fmt: QFormat
    spec: str                      # "fmt,block_rows,block_cols,exact_bf16" (see _spec)
    data: Tensor
    scale: Tensor
    amax: Tensor


def _placeholder(x):
    return [x.new_empty(0, dtype=torch.uint8) for _ in range(3)]


@torch.library.custom_op("microscale::quantize_grouped", mutates_args=())
def _quantize_grouped_op(x: Tensor, offs: Tensor, row: str, col: str, multiple: int,
                         bound: int, backend: str, seeds: Optional[Tensor],
                         row_rand_bits: Optional[Tensor], col_rand_bits: Optional[Tensor],
                         row_scale: Optional[Tensor], col_scale: Optional[Tensor]
                         ) -> list[Tensor]:
    _check_bound(x, offs, multiple, bound)
    views = [parse_view_spec(s) if s else None for s in (row, col)]
    key = rowcol_key(*(v[0].value if v else None for v in views))
    outs = dispatch("quantize_grouped", key, backend, x.device, quantize_grouped_reference, x,
                    offs, *views, multiple, seeds, row_rand_bits, col_rand_bits, row_scale,
                    col_scale, backend)
    flat = []
    for out in outs:
        flat += [t.contiguous() for t in out] if out is not None else _placeholder(x)
    return list(_fresh(flat, (x, offs, seeds, row_rand_bits, col_rand_bits, row_scale,
                              col_scale)))


@_quantize_grouped_op.register_fake
def _(x, offs, row, col, multiple, bound, backend, seeds, row_rand_bits, col_rand_bits,
      row_scale, col_scale):
    T, K, n = x.shape[0], x.shape[1], offs.shape[0]
    _check_bound(x, offs, multiple, bound)
    flat = []
    for spec, (rows, cols) in ((row, (T, K)), (col, (K, bound))):
        if spec:
            fmt, opts = parse_view_spec(spec)
            (ds, dd), (ss, sd) = _layout(fmt, opts, rows, cols)
            ss = (n,) if fmt == QFormat.FP8_TENSOR else ss
            flat += [x.new_empty(ds, dtype=dd), x.new_empty(ss, dtype=sd),
                     x.new_empty((n,), dtype=torch.float32)]
        else:
            flat += _placeholder(x)
    return flat


def _check_bound(x: Tensor, offs: Tensor, multiple: int, bound: int) -> None:
    """The padded column layout's length, given explicitly so that it is written in a traced
    graph (a compiler caches graphs by their text and inputs, not by how a fake kernel computes
    its shapes: a cached graph then never holds a bound from another version of
    ``padded_bound``); it must be the one ``padded_bound`` gives."""
    want = padded_bound(x.shape[0], offs.shape[0], multiple)
    if bound != want:
        raise ValueError(f"quantize_grouped: bound {bound} is not the padded layout's length "
                         f"{want} for {x.shape[0]} tokens, {offs.shape[0]} groups, multiple "
                         f"{multiple}")


# ============================================================================ GEMM
def grouped_mm_compat(a: Tensor, b: Tensor, offs: Tensor, out_dtype=None) -> Tensor:
    """``torch._grouped_mm(a, b, offs=offs, out_dtype=...)`` across torch 2.11-2.13: the same
    signature in all three, but a build may insist on a memory layout (row-major ``a``,
    column-major ``b`` on CUDA): the strides given are tried first, then those layouts.
    Layout errors are argument checks, raised before anything runs."""
    err = None
    for x, y in ((a, b), (a.contiguous(), b.mT.contiguous().mT), (a.contiguous(), b.contiguous())):
        try:
            if out_dtype is None or out_dtype == x.dtype:
                return torch._grouped_mm(x, y, offs=offs)
            return torch._grouped_mm(x, y, offs=offs, out_dtype=out_dtype)
        except RuntimeError as e:
            err = e
    raise err


@torch.library.custom_op("microscale::hp_grouped_mm", mutates_args=())
def hp_grouped_mm(a: Tensor, b: Tensor, offs: Tensor, compute_dtype: torch.dtype,
                  out_dtype: torch.dtype) -> Tensor:
    """An unquantized grouped GEMM in ``compute_dtype`` inside a grouped layer's
    autograd.Function, opaque to the compiler like the quantized ones (as ``ops.hp_mm``: traced
    as a plain matmul inside ``QuantizedLinearFn``, Inductor on CUDA compiled switched blocks to
    zero gradients, session 10)."""
    return grouped_mm_compat(a.to(compute_dtype), b.to(compute_dtype), offs).to(out_dtype)


@hp_grouped_mm.register_fake
def _(a, b, offs, compute_dtype, out_dtype):
    # 2-D x 3-D: [T, N] rows grouped; 2-D x 2-D: [E, M, N], the reduction grouped (wgrad)
    shape = (offs.shape[0], a.shape[0], b.shape[1]) if a.dim() == b.dim() == 2 else \
        (a.shape[0], b.shape[-1])
    return a.new_empty(shape, dtype=out_dtype)


def _spec(fmt: QFormat, opts: dict) -> str:
    """Operand spec ``"fmt,block_rows,block_cols,exact_bf16"``: whether ``value · block scale``
    is exact in bf16 (E2M1/FP8 values times E4M3 or power-of-two scales; FP8 tensorwise keeps
    its scale out of the operand), else the sync-free GEMM runs in fp32."""
    if fmt == QFormat.FP8_TENSOR:
        return f"{fmt.value},0,0,1"
    block = {QFormat.NVFP4: (16, 16) if opts.get("block_2d") else (1, 16),
             QFormat.FP8_BLOCK: tuple(opts.get("block", (1, 128)))}.get(fmt, (1, 32))
    exact = fmt != QFormat.FP8_BLOCK or opts.get("pow2_scales", True)
    return f"{fmt.value},{block[0]},{block[1]},{int(bool(exact))}"


@torch.library.custom_op("microscale::grouped_scaled_mm", mutates_args=())
def _grouped_mm_op(a_data: Tensor, a_scale: Tensor, a_spec: str, b_data: Tensor,
                   b_scale: Tensor, b_spec: str, offs: Tensor, mode: str,
                   backend: str) -> Tensor:
    key = mm_key(a_spec.split(",")[0], b_spec.split(",")[0])
    return dispatch("grouped_scaled_mm", key, backend, a_data.device, grouped_mm_reference,
                    a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode, backend)


@_grouped_mm_op.register_fake
def _(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode, backend):
    if mode == "tokens":
        return a_data.new_empty((a_data.shape[0], b_data.shape[-2]), dtype=torch.float32)
    return a_data.new_empty((offs.shape[0], a_data.shape[0], b_data.shape[0]),
                            dtype=torch.float32)


@torch.library.custom_op("microscale::grouped_scaled_mm_out", mutates_args=())
def _grouped_mm_out_op(a_data: Tensor, a_scale: Tensor, a_spec: str, b_data: Tensor,
                       b_scale: Tensor, b_spec: str, offs: Tensor, factor: Tensor,
                       out_dtype: torch.dtype, backend: str) -> Tensor:
    key = mm_key(a_spec.split(",")[0], b_spec.split(",")[0])
    return dispatch("grouped_scaled_mm_out", key, backend, a_data.device,
                    grouped_mm_out_reference, a_data, a_scale, a_spec, b_data, b_scale, b_spec,
                    offs, factor, out_dtype, backend)


@_grouped_mm_out_op.register_fake
def _(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, factor, out_dtype, backend):
    return a_data.new_empty((a_data.shape[0], b_data.shape[-2]), dtype=out_dtype)


# ============================================================================ delayed scaling
@torch.library.custom_op("microscale::delayed_scaling_update_grouped_",
                         mutates_args=("amax_history", "scale"))
def delayed_scaling_update_grouped_(amax_history: Tensor, scale: Tensor, amax: Tensor,
                                    active: Tensor, fp8_max: float, margin: int) -> None:
    """Per expert, :func:`~microscale.quant.fp8.delayed_scale_update_` for the experts that
    quantized this step (``active``); the others keep their history and scale, as an
    ``ms.Linear`` that saw no tokens would."""
    pushed = torch.cat([amax.float().reshape(-1, 1), amax_history[:, :-1]], dim=1)
    hist = torch.where(active[:, None], pushed, amax_history)
    hist_amax = hist.amax(dim=1)
    new = torch.full_like(hist_amax, fp8_max) / hist_amax / (2.0 ** margin)
    ok = active & (hist_amax > 0) & torch.isfinite(hist_amax) & torch.isfinite(new) & (new > 0)
    scale.copy_(torch.where(ok, new, scale))
    amax_history.copy_(hist)


@delayed_scaling_update_grouped_.register_fake
def _(amax_history, scale, amax, active, fp8_max, margin):
    return None


# ============================================================================ entry points
def _seeds_of(seeds: Tensor | None, views) -> Tensor | None:
    return seeds if seeds is not None and any(v and v[1].get("stochastic") for v in views) \
        else None


def quantize_grouped(x: Tensor, offs: Tensor, row, col, multiple: int, backend: str,
                     seeds: Tensor | None = None, row_scale: Tensor | None = None,
                     col_scale: Tensor | None = None, row_rand_bits: Tensor | None = None,
                     col_rand_bits: Tensor | None = None):
    """Row and column views (``(fmt, options)`` or None each) of a grouped token matrix."""
    out = torch.ops.microscale.quantize_grouped(
        x.detach(), offs, view_spec(*row) if row else "", view_spec(*col) if col else "",
        multiple, padded_bound(x.shape[0], offs.shape[0], multiple), backend,
        _seeds_of(seeds, (row, col)), row_rand_bits, col_rand_bits, row_scale, col_scale)
    return tuple(GroupedQ(v[0], _spec(*v), *out[3 * i:3 * i + 3]) if v else None
                 for i, v in enumerate((row, col)))


def grouped_gemm(qa: GroupedQ, qb: GroupedQ, offs: Tensor, mode: str, backend: str) -> Tensor:
    """The fp32 sum of block-scaled products (see the module docstring for the modes)."""
    return torch.ops.microscale.grouped_scaled_mm(qa.data, qa.scale, qa.spec, qb.data, qb.scale,
                                                  qb.spec, offs, mode, backend)


def grouped_gemm_out(qa: GroupedQ, qb: GroupedQ, offs: Tensor, factor: Tensor,
                     out_dtype: torch.dtype, backend: str) -> Tensor:
    """"tokens" GEMM in ``out_dtype``: each expert's sum times its ``factor`` (fp32 ``[E]``,
    e.g. :func:`grouped_factor`), one rounding; the kernels do it in the GEMM's epilogue."""
    return torch.ops.microscale.grouped_scaled_mm_out(qa.data, qa.scale, qa.spec, qb.data,
                                                      qb.scale, qb.spec, offs, factor.float(),
                                                      out_dtype, backend)


def _tensor_scale(q: GroupedQ) -> Tensor:
    if q.fmt == QFormat.NVFP4:
        return nvfp4_global_scales(q.amax)[1]
    if q.fmt == QFormat.FP8_TENSOR:
        return q.scale.float()
    return torch.ones_like(q.amax)


def factor_is_one(qa: GroupedQ, qb: GroupedQ) -> bool:
    """Whether :func:`grouped_factor` is all ones for these formats (no per-tensor scale on
    either side: FP8 blockwise, MX), so that multiplying by it can be skipped (``v · 1.0``
    is ``v``, NaN and -0 included)."""
    return not ({qa.fmt, qb.fmt} & {QFormat.NVFP4, QFormat.FP8_TENSOR})


def grouped_factor(qa: GroupedQ, qb: GroupedQ) -> Tensor:
    """Per-expert epilogue factor ``[E]``: NVFP4 × NVFP4 ``α_e`` (SPEC §6), else the product
    of the operands' per-tensor factors (FP8 tensorwise ``scale_inv``, NVFP4 ``S_dec``)."""
    if qa.fmt == qb.fmt == QFormat.NVFP4:
        return nvfp4_alpha(qa.amax, qb.amax)
    return _tensor_scale(qa) * _tensor_scale(qb)
