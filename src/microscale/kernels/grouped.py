"""The sync-free grouped (MoE) path: the ``quantize_grouped`` and ``grouped_scaled_mm`` ops with
no host synchronisation, for CUDA tensors (and ``backend="triton"`` anywhere).

Quantization (:func:`quantize_grouped_fast`): group positions come from ``offs`` by device
ops (:func:`microscale.quant.grouped.group_layout`); the row view is quantized in place,
the column view from the padded layout ``x_pad [bound, K]`` built by one ``index_copy``. Per
view there is one quantizer call: formats whose scales are all per block (MXFP8, MXFP4, FP8
blockwise) go through the per-tensor Triton kernels (their blocks never cross an expert, so one
launch over the whole matrix quantizes every expert exactly as alone); NVFP4 and FP8
tensorwise, which have a per-tensor amax, compute it per expert with a segment max and then
run the reference arithmetic with that amax broadcast per row or per column (PyTorch ops; a
fused Triton kernel for the per-expert amax is future work, see docs/moe.md).

GEMMs (:func:`grouped_mm_fast`): both operands are partially dequantized (``value · block
scale``, exact in bf16 for E2M1/FP8 values with E4M3 or power-of-two scales, gemm_fp4.py's
argument) and multiplied by one ``torch._grouped_mm``: tokens × stacked experts for fprop and
dgrad (groups along M, ``offs``), and the padded column views for wgrad (groups along K,
``pad_ends``: the 2d × 2d form, ``[E, M, N]`` out). On CUDA the operands are bf16 with fp32
accumulation; on CPU they stay fp32 (CPU's grouped GEMM returns its input dtype).
``torch._grouped_mm(mat_a, mat_b, offs=..., out_dtype=...)`` has this signature in torch
2.11-2.13; where a build rejects ``out_dtype`` (or bf16), the next form is tried and the path
taken is recorded (``ms.explain``).
"""

from __future__ import annotations

import torch

from ..backend import dispatch, mm_key, note_path, register_kernel, rowcol_key
from ..ops import reference_quantizer
from ..ops_grouped import _as_2d, grouped_mm_compat, partial_values
from ..quant.grouped import group_layout, quantize_segments
from ..tensor import QFormat

__all__ = ["grouped_mm_fast", "quantize_grouped_fast"]


def _block_fn(fmt: QFormat, backend: str):
    """The per-tensor quantize dispatch (Triton kernel on CUDA) for a block-scaled format."""
    def run(x2, **opts):
        return dispatch("quantize", fmt.value, backend, x2.device, reference_quantizer(fmt), x2,
                        **opts)
    return run


def quantize_grouped_fast(x, offs, row, col, multiple, seeds, row_bits, col_bits, row_scale,
                          col_scale, backend: str = "auto"):
    """Same outputs as ``ops_grouped.quantize_grouped_reference``, without reading ``offs``."""
    lay = group_layout(offs, x.shape[0], multiple)
    note_path("quantize_grouped", rowcol_key(row and row[0].value, col and col[0].value),
              "sync-free: per-expert amax by segment max, one quantizer pass per view")
    outs = [None, None]
    if row:
        fmt, opts = row[0], dict(row[1], check_finite=False)
        if row_bits is not None:
            opts["rand_bits"] = row_bits
        outs[0] = quantize_segments(x, fmt, opts, lay.row_groups(), lay.starts, lay.counts,
                                    "rows", seeds, row_scale, _block_fn(fmt, backend))
    if col:
        fmt, opts = col[0], dict(col[1], check_finite=False)
        if col_bits is not None:
            opts["rand_bits"] = col_bits
        xt = lay.pad(x).t().contiguous()
        outs[1] = quantize_segments(xt, fmt, opts, lay.col_groups(), lay.pad_starts,
                                    lay.pad_counts, "cols", None if seeds is None else seeds + 1,
                                    col_scale, _block_fn(fmt, backend))
    return outs


_FORMS: dict[str, str] = {}            # device type -> the _grouped_mm form that worked


def _grouped(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, exact_bf16: bool, key: str):
    """fp32 ``a @ b`` by groups (``torch._grouped_mm``), the fastest exact form this build takes."""
    dev = a.device.type
    forms = ["bf16->fp32", "fp32", "bf16"] if dev == "cuda" and exact_bf16 else ["fp32", "bf16"]
    if _FORMS.get(dev) in forms:
        forms.remove(_FORMS[dev])
        forms.insert(0, _FORMS[dev])
    err = None
    for form in forms:
        try:
            if form == "bf16->fp32":
                y = grouped_mm_compat(a.bfloat16(), b.bfloat16(), offs, torch.float32)
            elif form == "fp32":
                y = grouped_mm_compat(a, b, offs)
            else:      # bf16 out: one extra rounding, still within the GEMM tolerance
                y = grouped_mm_compat(a.bfloat16(), b.bfloat16(), offs).float()
        except (RuntimeError, NotImplementedError) as e:
            err = e
            continue
        _FORMS[dev] = form
        note_path("grouped_scaled_mm", key, f"sync-free: torch._grouped_mm ({form})")
        return y
    raise RuntimeError(f"grouped_scaled_mm: torch._grouped_mm failed in every form: {err}")


def grouped_mm_fast(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode,
                    backend: str = "auto"):
    """Same result as ``ops_grouped.grouped_mm_reference``, without reading ``offs``."""
    pa = partial_values(*_as_2d(a_data, a_scale, a_spec), a_spec)
    pb = partial_values(*_as_2d(b_data, b_scale, b_spec), b_spec)
    exact = a_spec.endswith(",1") and b_spec.endswith(",1")
    key = mm_key(a_spec.split(",")[0], b_spec.split(",")[0])
    offs32 = offs.to(torch.int32)
    if mode == "tokens":                 # [T, K] · [E, N, K]ᵀ, groups of rows
        pb = pb.reshape(offs.shape[0], -1, pb.shape[-1])
        return _grouped(pa, pb.transpose(1, 2), offs32, exact, key)
    y = _grouped(pa, pb.t(), offs32, exact, key)      # [M, bound] · [bound, N], groups of K
    ends = offs.to(torch.int64)
    empty = (ends - torch.cat([ends.new_zeros(1), ends[:-1]])) == 0
    return torch.where(empty[:, None, None], torch.zeros_like(y), y)   # K = 0: exact zeros


def _register() -> None:
    names = [None] + [f.value for f in QFormat]
    for r in names:
        for c in names:
            if r or c:
                register_kernel("quantize_grouped", rowcol_key(r, c))(quantize_grouped_fast)
    for a in names[1:]:
        for b in names[1:]:
            register_kernel("grouped_scaled_mm", mm_key(a, b))(grouped_mm_fast)


_register()
