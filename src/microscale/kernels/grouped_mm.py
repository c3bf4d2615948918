"""The sync-free grouped (MoE) GEMM ops' kernel twins (``grouped_scaled_mm`` and
``grouped_scaled_mm_out``), registered by ``kernels/grouped.py`` beside its quantizer.

GEMMs (:func:`grouped_mm_fast`): first the Triton grouped GEMM (``kernels/gemm_grouped.py``,
fp32 result, group offsets read inside the kernel): FP8 blockwise × FP8 blockwise straight on
the FP8 codes with the block scales applied per 128-wide K chunk in the main loop (FP8 tensor
cores), and every other pair whose partial values (``value · block scale``) are exact in bf16
on the bf16 tensor cores (NVFP4/MX partially dequantized by gemm_fp4's Triton
``dequantize_bf16`` pass, FP8 in bf16). Otherwise (no Triton, or a pair not exact in bf16) both
operands are partially dequantized and multiplied by one ``torch._grouped_mm``: tokens ×
stacked experts for fprop and dgrad (groups along M, ``offs``), and the padded column views for
wgrad (groups along K, ``pad_ends``: the 2d × 2d form, ``[E, M, N]`` out), bf16 operands with
fp32 output where the build accepts it, else fp32 (no tensor cores: torch 2.11's CUDA
``_grouped_mm`` refused bf16 → fp32 on an H200). ``torch._grouped_mm(mat_a, mat_b, offs=...,
out_dtype=...)`` has this signature in torch 2.11-2.13; where a build rejects ``out_dtype`` (or
bf16), the next form is tried. The path taken is recorded (``ms.explain``).
"""

from __future__ import annotations

import torch

from ..backend import KernelUnsupported, _interpreting, mm_key, note_path
from ..ops_grouped import (REDUCE_ALIGN, _as_2d, as_quantized, grouped_mm_compat,
                           partial_values)
from ..tensor import QFormat

__all__ = ["grouped_mm_fast", "grouped_mm_out_fast", "partial_values_fast"]


_DEQUANT = {QFormat.NVFP4, QFormat.MXFP4, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2}


def partial_values_fast(data, scale, spec: str) -> torch.Tensor:
    """``value · block scale`` of an operand: bf16 from gemm_fp4's Triton dequantize pass (one
    read of the codes, one bf16 write; exact) for FP4/MX on CUDA or in the interpreter; FP8 on
    CUDA in bf16 with the scales broadcast per block (exact for power-of-two scales); else the
    PyTorch decode in fp32."""
    if data.dtype == torch.bfloat16:           # an expanded view: the partial values already
        return data
    fmt = QFormat(spec.split(",")[0])
    if fmt in _DEQUANT and (data.device.type == "cuda" or _interpreting()):
        try:
            from .gemm_fp4 import dequantize_bf16
            return dequantize_bf16(as_quantized(data.contiguous(), scale.contiguous(), spec))
        except (ImportError, KernelUnsupported):
            pass
    if data.device.type == "cuda" and spec.endswith(",1"):
        if fmt == QFormat.FP8_TENSOR:                 # the scale is a per-expert factor
            return data.to(torch.bfloat16)
        if fmt == QFormat.FP8_BLOCK:
            return _fp8_block_bf16(data, scale, spec)
    return partial_values(data, scale, spec)


def _fp8_block_bf16(data, scale, spec: str) -> torch.Tensor:
    """FP8 blockwise ``value · scale_inv`` in bf16 without expanding the scales to ``[rows, K]``
    (E4M3 values times power-of-two scales: every product is a bf16)."""
    _, br, bc, _ = spec.split(",")
    br, bc = int(br), int(bc)
    rows, cols = data.shape
    v = data.to(torch.bfloat16).view(rows // br, br, cols // bc, bc)
    s = scale.to(torch.bfloat16).view(rows // br, 1, cols // bc, 1)
    return (v * s).view(rows, cols)


_FORMS: dict[str, str] = {}            # device type -> the _grouped_mm form that worked


def _grouped(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, exact_bf16: bool, key: str):
    """fp32 ``a @ b`` by groups (``torch._grouped_mm``), the fastest exact form this build takes."""
    dev = a.device.type
    forms = ["bf16->fp32", "fp32", "bf16"] if dev == "cuda" and exact_bf16 else ["fp32", "bf16"]
    if dev == "cuda" and not exact_bf16:
        forms.remove("bf16")              # never round a non-bf16-exact operand
    if _FORMS.get(dev) in forms:
        forms.remove(_FORMS[dev])
        forms.insert(0, _FORMS[dev])
    err = None
    for form in forms:
        try:
            if form == "bf16->fp32":
                y = grouped_mm_compat(a.bfloat16(), b.bfloat16(), offs, torch.float32)
            elif form == "fp32":
                y = grouped_mm_compat(a.float(), b.float(), offs)
            else:      # bf16 out: one extra rounding, still within the GEMM tolerance
                y = grouped_mm_compat(a.bfloat16(), b.bfloat16(), offs).float()
        except (RuntimeError, NotImplementedError) as e:
            err = e
            continue
        _FORMS[dev] = form
        note_path("grouped_scaled_mm", key, f"sync-free: torch._grouped_mm ({form})")
        return y
    raise RuntimeError(f"grouped_scaled_mm: torch._grouped_mm failed in every form: {err}")


ENABLE_TRITON = True      # False: the torch._grouped_mm path below (for A/B timings)


def _triton_grouped(a2, sa2, a_spec, b2, sb2, b_spec, offs, mode, key, factor=None,
                    out_dtype=torch.float32, op="grouped_scaled_mm"):
    """The Triton grouped GEMM (``gemm_grouped``) where it takes the call, else None: FP8
    blockwise × FP8 blockwise on the FP8 codes with the block scales in the main loop, and
    any pair whose partial values are exact in bf16 on bf16 tensor cores (fp32 accumulate;
    "tokens": the per-expert ``factor`` and ``out_dtype`` in the epilogue).
    ``ENABLE_TRITON = False`` restores the ``torch._grouped_mm`` path."""
    if not ENABLE_TRITON or not (a2.device.type == "cuda" or _interpreting()):
        return None
    fa, fb = a_spec.split(",")[0], b_spec.split(",")[0]
    out = dict(factor=factor, out_dtype=out_dtype) if mode == "tokens" else {}
    epi = "" if factor is None else f", the experts' factors in the epilogue, {out_dtype} out"
    try:
        from .gemm_grouped import grouped_gemm, uses_tma
        if fa == fb == QFormat.FP8_BLOCK.value:
            y = grouped_gemm(a2, b2, offs, mode, sa=sa2.float(), sb=sb2.float(),
                             br_a=int(a_spec.split(",")[1]), br_b=int(b_spec.split(",")[1]),
                             k_align=REDUCE_ALIGN, **out)
            via = "TMA descriptors" if uses_tma(a2, b2) else "pointer loads"
            note_path(op, key, f"sync-free: Triton grouped FP8 GEMM (operands through {via}, "
                      f"block scales in the main loop{epi})")
            return y
        if a_spec.endswith(",1") and b_spec.endswith(",1"):
            pa, pb = partial_values_fast(a2, sa2, a_spec), partial_values_fast(b2, sb2, b_spec)
            y = grouped_gemm(pa.to(torch.bfloat16), pb.to(torch.bfloat16), offs, mode,
                             k_align=REDUCE_ALIGN, **out)
            note_path(op, key, f"sync-free: Triton grouped GEMM (bf16 partial values, fp32 "
                      f"accumulate{epi})")
            return y
    except (ImportError, KernelUnsupported):
        return None
    return None


def grouped_mm_fast(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, mode,
                    backend: str = "auto"):
    """Same result as ``ops_grouped.grouped_mm_reference``, without reading ``offs``."""
    (a2, sa2), (b2, sb2) = _as_2d(a_data, a_scale, a_spec), _as_2d(b_data, b_scale, b_spec)
    key = mm_key(a_spec.split(",")[0], b_spec.split(",")[0])
    y = _triton_grouped(a2, sa2, a_spec, b2, sb2, b_spec, offs, mode, key)
    if y is not None:
        return y
    pa, pb = partial_values_fast(a2, sa2, a_spec), partial_values_fast(b2, sb2, b_spec)
    exact = a_spec.endswith(",1") and b_spec.endswith(",1")
    offs32 = offs.to(torch.int32)
    if mode == "tokens":                 # [T, K] · [E, N, K]ᵀ, groups of rows
        pb = pb.reshape(offs.shape[0], -1, pb.shape[-1])
        return _grouped(pa, pb.transpose(1, 2), offs32, exact, key)
    y = _grouped(pa, pb.t(), offs32, exact, key)      # [M, bound] · [bound, N], groups of K
    ends = offs.to(torch.int64)
    empty = (ends - torch.cat([ends.new_zeros(1), ends[:-1]])) == 0
    return torch.where(empty[:, None, None], torch.zeros_like(y), y)   # K = 0: exact zeros


def grouped_mm_out_fast(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, factor,
                        out_dtype, backend: str = "auto"):
    """``ops_grouped.grouped_mm_out_reference`` without reading ``offs``: the Triton kernel
    with the factor in its epilogue, else the fp32 sum times each row's expert factor (tail
    rows past the last group stay zero) and the cast."""
    a2, sa2 = _as_2d(a_data, a_scale, a_spec)
    if b_data.dim() == 3 and b_data.dtype == torch.bfloat16 and not b_data.is_contiguous():
        b2, sb2 = b_data, b_scale   # the experts' transposes of one expanded view: in place
    else:
        b2, sb2 = _as_2d(b_data, b_scale, b_spec)
    key = mm_key(a_spec.split(",")[0], b_spec.split(",")[0])
    y = _triton_grouped(a2, sa2, a_spec, b2, sb2, b_spec, offs, "tokens", key, factor,
                        out_dtype, op="grouped_scaled_mm_out")
    if y is not None:
        return y
    y = grouped_mm_fast(a_data, a_scale, a_spec, b_data, b_scale, b_spec, offs, "tokens")
    rows = torch.arange(y.shape[0], device=y.device)
    g = torch.searchsorted(offs.to(torch.int64), rows, right=True)
    f = torch.where(g < offs.shape[0], factor.float()[g.clamp(max=offs.shape[0] - 1)], 1.0)
    note_path("grouped_scaled_mm_out", key, "sync-free: grouped GEMM, then the experts' "
              "factors in a pass of their own")
    return (y * f[:, None]).to(out_dtype)
