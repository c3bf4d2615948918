"""microscale: block-scaled low-precision training for PyTorch.

Exact NVFP4, MXFP4, MXFP8 and FP8 (blockwise, tensorwise, delayed) quantizers, per-GEMM
recipes, drop-in quantized ``Linear`` layers and a training harness that runs on CPU and
on Hopper GPUs. The numeric contract is ``shared/SPEC.md``; the reference implementations
in :mod:`microscale.quant` are that spec in code.

The core (formats, quantizers, RHT, scaled GEMM) is imported eagerly and needs only torch;
the layers, analysis and training harness load on first use.
"""

from __future__ import annotations

import importlib

from .formats import E2M1, E4M3, E5M2, pack_fp4, unpack_fp4
from .gemm import scaled_mm
from .hadamard import rht, rht_inverse
from .quant.fp8 import DelayedScaling
from .quantize import FORMATS, dequantize, quantize, quantize_rowcol
from .tensor import QFormat, QuantizedTensor

__version__ = "0.1.0"

# name -> module that defines it, imported on first attribute access (keeps `import` light)
_LAZY = {
    "Recipe": "microscale.recipe",
    "OperandConfig": "microscale.recipe",
    "GemmConfig": "microscale.recipe",
    "Rounding": "microscale.recipe",
    "Linear": "microscale.nn.linear",
    "TransposedLinear": "microscale.nn.transposed",
    "convert": "microscale.nn.convert",
    "ConversionReport": "microscale.nn.convert",
    "PrecisionSchedule": "microscale.nn.schedule",
    "high_precision": "microscale.nn.schedule",
    "weight_cache": "microscale.nn.weight_cache",
    "linear_from": "microscale.nn.recompute",
    "relu2_mlp": "microscale.nn.mlp",
    "set_recompute_input": "microscale.nn.recompute",
    "export": "microscale.integrations.export",
    "analyze": "microscale.analysis.analyze",
    "QuantMonitor": "microscale.analysis.monitor",
    "explain": "microscale.backend",
    "grouped_mm": "microscale.nn.grouped",
    "GroupedLinear": "microscale.nn.experts",
    "QuantizedExperts": "microscale.nn.experts",
    "set_strict": "microscale.backend",
}

__all__ = [
    "quantize", "quantize_rowcol", "dequantize", "scaled_mm", "rht", "rht_inverse", "QuantizedTensor", "QFormat",
    "FORMATS", "DelayedScaling", "E2M1", "E4M3", "E5M2", "pack_fp4", "unpack_fp4",
    *_LAZY,
]


_SUBPACKAGES = ("integrations", "distributed")       # ms.integrations.transformers... without an import


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'microscale' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
