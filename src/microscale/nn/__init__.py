"""Quantized training layers: ``Linear``, model conversion and the precision schedule.

* :class:`Linear` -- drop-in ``nn.Linear`` whose fprop/dgrad/wgrad GEMMs follow a Recipe.
* :class:`TransposedLinear` -- the same for weights stored ``[in, out]`` (HF ``Conv1D``, GPT-2).
* :func:`convert` -- swap a model's ``nn.Linear`` / ``Conv1D`` layers in place, keeping the
  embeddings, the output head and the last blocks in high precision; returns a
  :class:`ConversionReport` that accounts for every GEMM.
* :class:`PrecisionSchedule` / :func:`high_precision` -- switch converted layers to high
  precision from a given step (fprop only or all GEMMs), or temporarily for evaluation.
* :func:`linear_from` / :func:`set_recompute_input` -- ``layer(op(*sources))`` that can keep the
  sources for backward instead of the layer's quantized input (an MLP's down projection after
  relu² or SwiGLU): less memory for some time, off by default.
* :func:`relu2_mlp` -- ``down(relu(up(x))²)`` as one autograd node: where the up projection's
  dy views are FP8 1x128 or MXFP8, its quantizer reads the down projection's dgrad output and
  the pre-activation instead of a written-out gradient (``nn.mlp``; the zoo's relu² MLP).
* :func:`weight_cache` -- quantize the weights once per optimizer step under gradient
  accumulation.
"""

from .convert import ConversionReport, convert
from .linear import Linear, saved_activation_bytes
from .mlp import relu2_mlp
from .recompute import linear_from, set_recompute_input
from .schedule import PrecisionSchedule, high_precision
from .transposed import TransposedLinear
from .weight_cache import weight_cache

__all__ = ["Linear", "TransposedLinear", "saved_activation_bytes", "convert", "ConversionReport",
           "PrecisionSchedule", "high_precision", "weight_cache", "linear_from",
           "set_recompute_input", "relu2_mlp"]
