"""FP8 blockwise fprop/dgrad GEMMs through DeepGEMM, where it is installed (optional).

DeepGEMM (github.com/deepseek-ai/DeepGEMM, MIT) is DeepSeek's JIT-compiled FP8 GEMM library
for Hopper. Its ``fp8_gemm_nt`` with ``recipe (1, 128, 128)`` computes exactly the product that
:mod:`.gemm_fp8` sends to cuBLASLt for a 1×128 activation or gradient times a 128×128 weight
(fprop ``x Wᵀ`` and dgrad ``dy W`` of ``fp8_blockwise``)::

    y[m, n] = Σ_kb  sa[m, kb] · sb[n/128, kb] · Σ_{k in block kb} a[m, k] · b[n, k]

FP8 tensor-core products summed in fp32 per 128-wide K block, each block's sum scaled before it
joins the total (SPEC: exact up to summation order), and one rounding to bf16.

Measured (H200, torch 2.11, CUDA 13.0, DeepGEMM 2.6.1 at ``54e2261``, graph-replayed,
``benchmarks/bench_deepgemm.py``, session 48 call 9): at every fprop/dgrad shape of a 1b block
and of issue 12's 4096→14336 layer (16384 tokens) 1.07-1.26× the speed of cuBLASLt (1.12-1.15×
at the large ones, 1175-1312 TFLOP/s against 1026-1164), its outputs bit-identical to
cuBLASLt's at all ten shapes. Its weight-gradient kernel (``(1, 1, 128)``, both operands 1×128)
ran 0.85-1.04× of cuBLASLt's, so weight gradients stay on cuBLASLt.

Layouts are the ones our quantizers already write: A ``[M, K]`` and B ``[N, K]`` E4M3 codes,
K-contiguous; A's fp32 scales ``[M, K/128]`` M-major (column-major, as cuBLASLt wants them; rows
a multiple of 4 keep them TMA-aligned, else DeepGEMM copies them), B's ``[N/128, K/128]``
contiguous (or its transpose). The output is bf16 (DeepGEMM's 1×128 · 128×128 kernel writes
nothing else), which is what fprop and dgrad ask for.

Choosing it: :func:`refuses` says why DeepGEMM cannot take a call (None when it can); then
``scaled_mm_fp8`` runs it and records the path (``ms.explain()``: ``scaled_mm(fp8_blockx
fp8_block 1x128·128x128)``). ``CONFIG["ENABLED"]`` (env ``MICROSCALE_DEEPGEMM=0`` turns it off)
switches it; an error from DeepGEMM at run time falls back to cuBLASLt through
``backend.note_fallback`` (a warning, or an error in strict mode), never silently, and turns
it off for the rest of the process (no retry per call). Measured at the 1b and issue-12 shapes
only; the 125m shapes (768 and 3072 wide, k/v 256) are in ``bench_deepgemm.py`` for the next
GPU session.

Installing it: DeepGEMM is built from source (with CUTLASS's and fmt's headers). On images
whose libstdc++ differs from the one PyTorch's wheel was linked with, its module must carry its
own libstdc++ (``-static-libstdc++ -Wl,-Bsymbolic``): built plainly, its JIT's ``std::regex``
and stream formatting crashed inside libstdc++'s locale facets (session 48, calls 3-8;
``tools/build_deepgemm.py`` builds it that way, and clones it where asked).
"""

from __future__ import annotations

import os

import torch

from ..tensor import QFormat, QuantizedTensor

__all__ = ["CONFIG", "deepgemm_module", "refuses", "scaled_mm_deepgemm", "PATH_KEY"]

CONFIG = {"ENABLED": os.environ.get("MICROSCALE_DEEPGEMM", "1") != "0"}
PATH_KEY = "fp8_blockxfp8_block 1x128·128x128"      # its entry in ms.explain()
_MODULE: list = []                                   # [module or None, import error]


def deepgemm_module():
    """The ``deep_gemm`` module, imported once; None where it is not installed."""
    if not _MODULE:
        try:
            import deep_gemm
            _MODULE[:] = [deep_gemm, ""]
        except Exception as err:           # not installed, or built for another torch/CUDA
            _MODULE[:] = [None, f"{type(err).__name__}: {err}"]
    return _MODULE[0]


def refuses(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype) -> str | None:
    """Why DeepGEMM's 1×128 · 128×128 kernel cannot take ``qa @ qbᵀ`` (None: it can)."""
    if not CONFIG["ENABLED"]:
        return "off (CONFIG['ENABLED'] / MICROSCALE_DEEPGEMM=0)"
    if qa.fmt != QFormat.FP8_BLOCK or qb.fmt != QFormat.FP8_BLOCK:
        return "not FP8 blockwise"
    if tuple(qa.block) != (1, 128) or tuple(qb.block) != (128, 128):
        return f"scale blocks {tuple(qa.block)} x {tuple(qb.block)}, not (1, 128) x (128, 128)"
    if qa.data.dtype != torch.float8_e4m3fn or qb.data.dtype != torch.float8_e4m3fn:
        return "not E4M3 codes"
    if out_dtype != torch.bfloat16:
        return f"{out_dtype} output (the kernel writes bf16)"
    if qa.device.type != "cuda" or torch.cuda.get_device_capability(qa.device)[0] != 9:
        return "not a Hopper (sm_90) GPU"
    n, k = qb.data.shape[0], qa.data.shape[1]
    if k % 128 or n % 8:                  # TMA: 16-byte rows of B and of the bf16 output
        return f"K = {k} not a multiple of 128 or N = {n} not a multiple of 8"
    if deepgemm_module() is None:
        return f"deep_gemm is not importable ({_MODULE[1][:120]})"
    return None


def _scales(qa: QuantizedTensor, qb: QuantizedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A's scales M-major, B's contiguous or transposed-contiguous (copies only if not)."""
    sa, sb = qa.scale.float(), qb.scale.float()
    if sa.stride(0) != 1:
        sa = sa.t().contiguous().t()
    if not (sb.is_contiguous() or sb.t().is_contiguous()):
        sb = sb.contiguous()
    return sa, sb


def scaled_mm_deepgemm(qa: QuantizedTensor, qb: QuantizedTensor) -> torch.Tensor:
    """``A Bᵀ`` in bf16 through ``deep_gemm.fp8_gemm_nt`` (check :func:`refuses` first)."""
    sa, sb = _scales(qa, qb)
    y = torch.empty(qa.data.shape[0], qb.data.shape[0], device=qa.device, dtype=torch.bfloat16)
    deepgemm_module().fp8_gemm_nt((qa.data, sa), (qb.data, sb), y, recipe=(1, 128, 128))
    return y
