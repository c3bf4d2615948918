"""Reference quantizers: the spec in code (pure PyTorch, any device, no Triton)."""

from .fp8 import DelayedScaling, quantize_fp8_block, quantize_fp8_tensor
from .mx import quantize_mx
from .nvfp4 import quantize_nvfp4

__all__ = ["quantize_nvfp4", "quantize_mx", "quantize_fp8_block", "quantize_fp8_tensor",
           "DelayedScaling"]
