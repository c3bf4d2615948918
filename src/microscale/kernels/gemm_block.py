"""The registered ``scaled_mm`` kernels of the block-scaled formats: NVFP4, MXFP4, MXFP8.

One entry point per format pair, :func:`scaled_mm_block`, picks the implementation:

1. **Native** (compute capability 10.x-12.x, ``kernels/blackwell.py``): the block-scaled tensor
   cores through torch, for NVFP4 × NVFP4, MXFP4 × MXFP4 and MXFP8 E4M3 × E4M3. If torch or
   cuBLAS refuse the call, the emulation below runs and the path says why (strict mode raises).
2. **The per-shape table** (``kernels/gemm_paths.py``): MXFP8 on FP8 tensor cores (Hopper:
   the Gluon kernel ``kernels/gemm_mxfp8_wgmma.py``; 8.9+ otherwise, or with a tile config:
   the ``tl`` kernel ``kernels/gemm_mxfp8.py``), or the emulation through bf16
   (``kernels/gemm_fp4.py``: dequantize + cuBLAS, or decode in the main loop).

``path=`` forces one ("native", "fp8", "dequant", "mainloop"; "auto" decides as above), which
is how the benchmarks and the tests reach every implementation. Every call records what ran
with :func:`~microscale.backend.note_path` (``ms.explain()`` prints it).
"""

from __future__ import annotations

import torch

from ..backend import (
    KernelUnsupported,
    explain,
    mm_key,
    note_fallback,
    note_path,
    register_kernel,
)
from ..op_specs import apply_prologue
from ..tensor import QFormat, QuantizedTensor
from . import blackwell, gemm_fp4, gemm_mxfp8, gemm_mxfp8_wgmma
from ._utils import device_capability, gemm_out, multiprocessors
from .gemm_paths import choose_path, family_of

__all__ = ["BLOCK_PATHS", "scaled_mm_block"]

BLOCK_PATHS = ("auto", "native", "fp8", "dequant", "mainloop")


def _sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 132
    return multiprocessors(device)


def _native_candidate(qa: QuantizedTensor, qb: QuantizedTensor) -> bool:
    return (qa.fmt == qb.fmt and qa.fmt in (QFormat.NVFP4, QFormat.MXFP4, QFormat.MXFP8_E4M3)
            and blackwell.has_native_block_scaling(qa.device))


def _native(qa, qb, out_dtype, apply_factor, key):
    y = blackwell.scaled_mm_native(qa, qb, out_dtype, apply_factor)
    major, minor = device_capability(qa.device)
    note_path("scaled_mm", key, f"native block-scaled GEMM (cuBLASLt, sm_{major}{minor}; "
              "not yet validated on hardware)")
    return y


def _emulated(qa, qb, out_dtype, apply_factor, path, key, config=None, epilogue=None):
    """The Hopper paths: FP8 tensor cores (MXFP8) or bf16 emulation; returns [rows_a, rows_b]."""
    if path == "fp8":
        why = None
        if not config and gemm_mxfp8_wgmma.available(qa.device):   # Hopper: the Gluon kernel
            try:
                y = gemm_mxfp8_wgmma.scaled_mm_mxfp8_wgmma(qa, qb, out_dtype)
                note_path("scaled_mm", key, "gluon MXFP8 on FP8 tensor cores (wgmma, "
                          "warp-specialized: gemm_mxfp8_wgmma)")
                return y
            except KernelUnsupported as err:     # e.g. unaligned codes: the tl kernel, noted
                why = str(err)
        cfg = gemm_mxfp8.MXFP8Config(**config) if config else \
            gemm_mxfp8.config_for(qa.rows, qb.rows, qa.cols, _sms(qa.device))
        y = gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, out_dtype, cfg)
        desc = f"triton MXFP8 on FP8 tensor cores ({cfg})"
        if why:
            note_fallback("scaled_mm", key, desc, why)
        else:
            note_path("scaled_mm", key, desc)
        return y
    fn = gemm_fp4.scaled_mm_mxfp8 if qa.fmt.is_mx8 else gemm_fp4.scaled_mm_fp4
    kwargs = {} if qa.fmt.is_mx8 else {"apply_factor": apply_factor, "epilogue": epilogue}
    y = fn(qa, qb, out_dtype, strategy=path, **kwargs)         # notes its own path
    return y if y.shape == (qa.rows, qb.rows) else y.reshape(qa.rows, qb.rows)


def scaled_mm_block(qa: QuantizedTensor, qb: QuantizedTensor,
                    out_dtype: torch.dtype = torch.float32, apply_factor: bool = True,
                    path: str = "auto", epilogue: tuple | None = None) -> torch.Tensor:
    """NVFP4/MXFP4/MXFP8 ``A @ Bᵀ`` (same contract as ``gemm.scaled_mm_reference``);
    ``epilogue`` ``(op, e2)``: ``op(y, e2)`` of the 2-D result, in the α GEMM's epilogue where
    the FP4 dequant path runs it (``gemm_fp4``), after the GEMM elsewhere."""
    if path not in BLOCK_PATHS:
        raise ValueError(f"path must be one of {BLOCK_PATHS}, got {path!r}")
    family = family_of(qa.fmt.value, qb.fmt.value)
    if family not in ("fp4", "mxfp8"):
        raise KernelUnsupported(f"{qa.fmt.value} x {qb.fmt.value} is not a block-scaled pair")
    key = mm_key(qa.fmt.value, qb.fmt.value)
    if epilogue is not None and not (family == "fp4" and (qa.expanded or qb.expanded)):
        y = scaled_mm_block(qa, qb, out_dtype, apply_factor, path)
        return apply_prologue(epilogue[0], y, epilogue[1].reshape(y.shape)) if epilogue[0] else y
    why = None
    if qa.expanded or qb.expanded:      # bf16 value·scale from the quantizer: the bf16 GEMM
        if path not in ("auto", "dequant"):
            raise KernelUnsupported(f"path {path!r} reads codes; an operand is expanded")
        return gemm_out(_emulated(qa, qb, out_dtype, apply_factor, "dequant", key,
                                  epilogue=epilogue), qa, qb)
    if path == "native" or (path == "auto" and _native_candidate(qa, qb)):
        try:
            return gemm_out(_native(qa, qb, out_dtype, apply_factor, key), qa, qb)
        except KernelUnsupported as err:
            if path == "native":
                raise
            why = str(err)
        chosen, config, _ = choose_path(family, qa.rows, qb.rows, qa.cols,
                                        gemm_mxfp8.has_fp8_tensor_cores(qa.device))
        note_fallback("scaled_mm", key, chosen, why)
    elif path == "auto":
        chosen, config, _ = choose_path(family, qa.rows, qb.rows, qa.cols,
                                        gemm_mxfp8.has_fp8_tensor_cores(qa.device))
    else:
        chosen, config = path, {}
    if chosen == "fp8" and family != "mxfp8":
        raise KernelUnsupported("the FP8 tensor-core path is for MXFP8 operands")
    y = _emulated(qa, qb, out_dtype, apply_factor, chosen, key, config)
    if why is not None:                 # keep the reason visible next to what ran
        note_path("scaled_mm", key, f"{explain()[('scaled_mm', key)]} (native refused: {why})")
    return gemm_out(y, qa, qb)


def _register() -> None:
    keys = ["nvfp4xnvfp4", "mxfp4xmxfp4"] + [
        mm_key(a, b) for a in ("mxfp8_e4m3", "mxfp8_e5m2") for b in ("mxfp8_e4m3", "mxfp8_e5m2")]
    for key in keys:
        register_kernel("scaled_mm", key)(_kernel)


def _kernel(qa, qb, out_dtype=torch.float32, apply_factor=True, epilogue=None):
    return scaled_mm_block(qa, qb, out_dtype, apply_factor, epilogue=epilogue)


_kernel.hints = ("epilogue",)


_register()
