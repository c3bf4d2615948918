"""bf16 GEMMs on a CPU without bf16 arithmetic, computed as fp32 GEMMs of the same values.

The harness trains under ``torch.autocast(bf16)`` on every device, so that the bf16 baseline and
the quantized recipes' unquantized parts (the high-precision layers, attention's projections in
bf16 runs, the LM head) compute as they do on a GPU. A GPU's bf16 GEMM multiplies bf16
operands (each product exact in fp32), sums in fp32 and rounds the output to bf16 once. On a
CPU without AVX512-BF16 or AMX (this project's 2-core AVX2 machine, for one) torch's bf16
GEMM kernel runs far slower than its fp32 one, and how much depends on the operands' layouts:
torch 2.13, ``[1024, 128] @ [128, 512]``, 1.5 ms in fp32 against 4.5 to 180 ms in bf16
(2026-11-29). The default ``microscale compare`` spent ~90% of its bf16 run in ``aten::mm``.

:class:`Bf16GemmsInFp32`, a ``TorchDispatchMode`` active only inside its ``with`` block, runs
``mm``, ``addmm`` and ``bmm`` of plain bf16 CPU tensors as the fp32 op of the same bf16 values,
rounded to bf16: the GPU's arithmetic, up to the order of the fp32 sums (so not bit-equal to
torch's CPU bf16 kernel, whose own order is its own). Backward's GEMMs go through it too when
``backward()`` runs inside the block. Every other op, tensor subclasses (FSDP2's DTensors)
included, dispatches as usual. The Trainer enters it on CPU for an eager run
(:func:`cpu_bf16_gemm`) and records which way the GEMMs ran in its run config.
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Bf16GemmsInFp32", "cpu_bf16_gemm", "cpu_gemm_context", "native_bf16_cpu"]

_GEMMS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)


def _plain_bf16_cpu(t) -> bool:
    return type(t) is torch.Tensor and t.dtype == torch.bfloat16 and t.device.type == "cpu"


class Bf16GemmsInFp32(TorchDispatchMode):
    """``mm`` / ``addmm`` / ``bmm`` of plain bf16 CPU tensors as fp32 GEMMs, rounded to bf16."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if func in _GEMMS and tensors and all(_plain_bf16_cpu(t) for t in tensors):
            wide = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            return func(*wide, **kwargs).to(torch.bfloat16)
        return func(*args, **kwargs)


def native_bf16_cpu() -> bool:
    """Whether this CPU has bf16 arithmetic torch's kernels use (AVX512-BF16 or AMX)."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def cpu_bf16_gemm(device: torch.device, compiled: bool) -> str:
    """How a run's bf16 GEMMs compute: ``"fp32"`` (:class:`Bf16GemmsInFp32`) for an eager CPU
    run on a CPU without native bf16, unless ``MICROSCALE_CPU_BF16_GEMM=native``; else
    ``"native"`` (a GPU's, a compiled graph's or such a CPU's own kernels)."""
    choice = os.environ.get("MICROSCALE_CPU_BF16_GEMM", "auto")
    if choice not in ("auto", "fp32", "native"):
        raise ValueError(f"MICROSCALE_CPU_BF16_GEMM must be auto, fp32 or native, got {choice!r}")
    if device.type != "cpu" or compiled or choice == "native":
        return "native"
    return "fp32" if choice == "fp32" or not native_bf16_cpu() else "native"


def cpu_gemm_context(how: str):
    """The context a run's steps and evaluations run in for :func:`cpu_bf16_gemm`'s answer."""
    return Bf16GemmsInFp32() if how == "fp32" else contextlib.nullcontext()
