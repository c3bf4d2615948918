"""The GEMM ops: ``scaled_mm`` (with an optional epilogue op), ``expand`` and ``hp_mm``, and the
:func:`mm` / :func:`expand` entry points (:mod:`microscale.ops` has the quantizers, the
registration helpers, and re-exports these).

``scaled_mm`` returns ``A Bᵀ`` of two quantized operands (their data, scales, amaxes and
operand specs: :mod:`microscale.op_specs`) through the one dispatch layer. Its ``epilogue``
``(op, e2)`` is ``op(y, e2)`` of the result for one of ``op_specs.PROLOGUES``' ops of two
tensors: a kernel that declares the ``"epilogue"`` hint applies it (NVFP4's α GEMM in its
epilogue, ``kernels/gemm_alpha``; other paths after their GEMM), and otherwise the op does,
after the GEMM; the reference twin is the GEMM then the op. ``expand`` is a codes operand's
decode pass as an op, so that identical decodes are one node to the compiler
(``nn.function``'s ``DECODE_XT_OP``). ``hp_mm`` is a high-precision GEMM kept opaque to the
compiler (see below).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import torch
from torch import Tensor

from .backend import dispatch, explain, kernel_takes_hint, mm_key, note_path, wants_kernel
from .op_specs import (OutAmax, _operand, apply_prologue, check_epilogue, operand_spec,
                       out_amax_reference)
from .ops import _define, _expanded, _fake
from .tensor import QuantizedTensor

__all__ = ["mm", "mm_amax", "expand", "hp_mm"]

# SCALES_OF_EXPANDED: hand an expanded FP4 operand's block scales to the GEMM op although it
# does not read them (:func:`_mm_scale`); on only to measure what leaving them out saves
CONFIG = {"SCALES_OF_EXPANDED": False}


def _scaled_mm_op(a_data: Tensor, a_scale: Tensor, a_amax: Tensor, a_spec: str, b_data: Tensor,
                  b_scale: Tensor, b_amax: Tensor, b_spec: str, out_dtype: torch.dtype,
                  backend: str, apply_factor: bool, epilogue: str = "",
                  e2: Optional[Tensor] = None, out_amax: Optional[OutAmax] = None) -> Tensor:
    from .gemm import scaled_mm_reference
    qa, qb = _operand(a_data, a_scale, a_amax, a_spec), _operand(b_data, b_scale, b_amax, b_spec)
    key = mm_key(qa.fmt.value, qb.fmt.value)
    hints, reference = None, scaled_mm_reference
    if epilogue:                 # op(y, e2): in a kernel's epilogue where one takes it
        check_epilogue("scaled_mm", epilogue, e2, (qa.rows, qb.rows), out_dtype)
    if (epilogue or out_amax) and kernel_takes_hint("scaled_mm", key, backend, qa.device,
                                                    "epilogue"):
        hints = {"epilogue": (epilogue, e2, out_amax) if out_amax else (epilogue, e2)}
        if epilogue:
            reference = functools.partial(_mm_reference_then, epilogue, e2)
    y = dispatch("scaled_mm", key, backend, qa.device, reference, qa, qb, out_dtype=out_dtype,
                 apply_factor=apply_factor, hints=hints)
    y = y if y.shape == (qa.rows, qb.rows) else y.reshape(qa.rows, qb.rows)
    return apply_prologue(epilogue, y, e2) if epilogue and hints is None else y


def _scaled_mm_amax_op(a_data: Tensor, a_scale: Tensor, a_amax: Tensor, a_spec: str,
                       b_data: Tensor, b_scale: Tensor, b_amax: Tensor, b_spec: str,
                       out_dtype: torch.dtype, backend: str, apply_factor: bool, epilogue: str,
                       e2: Optional[Tensor], rht: bool, amax_op: str = "") -> list[Tensor]:
    """``scaled_mm`` that also returns its output's NVFP4 amaxes (``op_specs.OutAmax``): in
    the GEMM's epilogue where its kernel measures them (NVFP4's α GEMM), else measured after
    the GEMM by the reference, the path saying so (``ms.explain``)."""
    req = OutAmax(a_data.new_zeros(2, dtype=torch.float32), rht, amax_op)
    y = _scaled_mm_op(a_data, a_scale, a_amax, a_spec, b_data, b_scale, b_amax, b_spec,
                      out_dtype, backend, apply_factor, epilogue, e2, req)
    if not req.filled:
        if wants_kernel(backend, y.device):
            key = mm_key(_operand(a_data, a_scale, a_amax, a_spec).fmt.value,
                         _operand(b_data, b_scale, b_amax, b_spec).fmt.value)
            note_path("scaled_mm", key, explain().get(("scaled_mm", key), "")
                      + "; the output's amaxes by the reference (a pass of their own)")
        req.buf.copy_(out_amax_reference(y, rht, amax_op))
    return [y, req.buf]


def _mm_reference_then(epilogue: str, e2: Tensor, qa, qb, **kwargs) -> Tensor:
    """The reference GEMM, then ``op(y, e2)`` (a fused epilogue's twin, and its fallback)."""
    from .gemm import scaled_mm_reference
    y = scaled_mm_reference(qa, qb, **kwargs)
    return apply_prologue(epilogue, y.reshape(e2.shape), e2)


_define("scaled_mm(Tensor a_data, Tensor a_scale, Tensor a_amax, str a_spec, Tensor b_data, "
        "Tensor b_scale, Tensor b_amax, str b_spec, ScalarType out_dtype, str backend, "
        "bool apply_factor, str epilogue=\"\", Tensor? e2=None) -> Tensor", _scaled_mm_op)


@_fake("scaled_mm")
def _(a_data, a_scale, a_amax, a_spec, b_data, b_scale, b_amax, b_spec, out_dtype, backend,
      apply_factor, epilogue="", e2=None):
    return a_data.new_empty((a_data.shape[0], b_data.shape[0]), dtype=out_dtype)


_define("scaled_mm_amax(Tensor a_data, Tensor a_scale, Tensor a_amax, str a_spec, "
        "Tensor b_data, Tensor b_scale, Tensor b_amax, str b_spec, ScalarType out_dtype, "
        "str backend, bool apply_factor, str epilogue, Tensor? e2, bool rht, "
        "str amax_op=\"\") -> Tensor[]",
        _scaled_mm_amax_op)


@_fake("scaled_mm_amax")
def _(a_data, a_scale, a_amax, a_spec, b_data, b_scale, b_amax, b_spec, out_dtype, backend,
      apply_factor, epilogue, e2, rht, amax_op=""):
    return [a_data.new_empty((a_data.shape[0], b_data.shape[0]), dtype=out_dtype),
            a_data.new_empty(2, dtype=torch.float32)]


def _expand_op(data: Tensor, scale: Tensor, amax: Tensor, spec: str, backend: str) -> Tensor:
    """The expanded data (bf16 ``value · block_scale``, ``tensor.py``) of a codes operand."""
    q = _operand(data, scale, amax, spec)
    if q.expanded or not q.fmt.expandable:  # (its output would be its input: not an op's)
        raise ValueError(f"expand: the operand must be NVFP4 / MXFP4 / MXFP8 codes, got {spec!r}")
    return _expanded(q, True, backend).data


# A GEMM operand's decode pass as an op of its own (``nn.function``: wgrad's xᵀ, where the
# GEMM would decode it anyway): identical calls are one node to the compiler, so q/k/v's
# shared xᵀ is decoded once, not by each of the three wgrad GEMMs.
_define("expand(Tensor data, Tensor scale, Tensor amax, str spec, str backend) -> Tensor",
        _expand_op)


@_fake("expand")
def _(data, scale, amax, spec, backend):
    q = _operand(data, scale, amax, spec)
    return data.new_empty((q.rows, q.cols), dtype=torch.bfloat16)


def expand(q: QuantizedTensor, backend: str) -> QuantizedTensor:
    """``q`` in the expanded form through ``microscale::expand`` (itself if it already is)."""
    if q.expanded:
        return q
    if not q.fmt.expandable:
        raise ValueError(f"expand() is for NVFP4 / MXFP4 / MXFP8 operands, not {q.fmt.value}")
    data = torch.ops.microscale.expand(q.data, q.scale, q.amax, operand_spec(q), backend)
    return dataclasses.replace(q, data=data, expanded=True)


def _hp_mm_op(a: Tensor, b: Tensor, compute_dtype: torch.dtype, out_dtype: torch.dtype) -> Tensor:
    return (a.to(compute_dtype) @ b.to(compute_dtype)).to(out_dtype)


# A high-precision GEMM inside a layer's autograd.Function (a GEMM the plan does not quantize),
# opaque to the compiler like the quantized ones: traced as a plain matmul there, Inductor on
# CUDA compiled a switched block's backward to zero gradients (torch 2.11, H100, session 10).
_define("hp_mm(Tensor a, Tensor b, ScalarType compute_dtype, ScalarType out_dtype) -> Tensor",
        _hp_mm_op)
hp_mm = torch.ops.microscale.hp_mm.default


@_fake("hp_mm")
def _(a, b, compute_dtype, out_dtype):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _mm_scale(q: QuantizedTensor) -> Tensor:
    """The block scales a GEMM op is given for ``q``: none (an empty tensor) for an expanded
    FP4 operand, whose data already holds ``value · block_scale`` and whose GEMM reads only
    that and the amax (``gemm.scaled_mm_reference``, ``kernels/gemm_fp4``). Under a compiler
    its scales are then not computed at all where nothing else reads them: the transpose of
    an expanded weight's 16×16 tile scales for dgrad (``tensor.QuantizedTensor.t``, a launch
    a weight) goes from the step."""
    if q.expanded and q.fmt.is_fp4 and not CONFIG["SCALES_OF_EXPANDED"]:
        return torch.empty(0, dtype=q.scale.dtype, device=q.data.device)
    return q.scale


def mm(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype, backend: str,
       apply_factor: bool = True, epilogue: tuple | None = None) -> Tensor:
    """``A Bᵀ`` through ``microscale::scaled_mm``, shaped ``[..., N]`` like A's leading dims.

    ``apply_factor=False`` returns the sum before the per-tensor factor ``f`` (``gemm_factor``;
    only NVFP4 has one): the caller multiplies and casts in its own graph, where a compiler
    fuses that into whatever consumes the result instead of a separate pass over it.
    ``epilogue`` ``(op, e2)``: ``op(y, e2)`` instead (``op_specs.PROLOGUES``' ops of two
    tensors; e2 ``[M, N]`` in ``out_dtype``), bit for bit, in the GEMM's epilogue where its
    kernel takes one (the NVFP4 α GEMM, ``kernels/gemm_alpha``).
    """
    op, e2 = epilogue if epilogue is not None else ("", None)
    y = torch.ops.microscale.scaled_mm(qa.data, _mm_scale(qa), qa.amax, operand_spec(qa),
                                       qb.data, _mm_scale(qb), qb.amax, operand_spec(qb),
                                       out_dtype, backend, apply_factor, op, e2)
    return y.reshape(*qa.shape[:-1], qb.rows)


def mm_amax(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype, backend: str,
            epilogue: tuple | None, rht: bool, amax_op: str = "") -> tuple[Tensor, Tensor]:
    """:func:`mm` (2-D ``qa``) and its output's NVFP4 amaxes as one fp32 ``[2]`` tensor
    (``op_specs.OutAmax``: ``max|t|``, and ``max|RHT(t)|`` down the columns where ``rht``, of
    ``t = y`` or ``amax_op(y)``), through ``microscale::scaled_mm_amax``: the quantizer of
    t's views then needs no amax pass (``nn.mlp``'s ``du`` and ``relu(u)²``)."""
    op, e2 = epilogue if epilogue is not None else ("", None)
    y, amaxes = torch.ops.microscale.scaled_mm_amax(
        qa.data, _mm_scale(qa), qa.amax, operand_spec(qa), qb.data, _mm_scale(qb), qb.amax,
        operand_spec(qb), out_dtype, backend, True, op, e2, rht, amax_op)
    return y, amaxes
