"""``TransposedLinear``: an ``ms.Linear`` whose master weight is stored ``[in, out]``.

Hugging Face's GPT-2 family (GPT-2, DistilGPT-2, GPT-J's ancestors, ...) builds every projection
from ``transformers.pytorch_utils.Conv1D``. Despite the name it is a linear layer, only with
the weight stored transposed and applied as ``y = x W + b`` (``torch.addmm``)::

    nn.Linear      weight [out, in]    y = x Wᵀ + b
    Conv1D         weight [in,  out]   y = x W  + b      (W = Wₗᵢₙₑₐᵣᵀ)

So a Conv1D is exactly ``nn.Linear`` with weight ``Wᵀ``: the same three GEMMs (fprop, dgrad,
wgrad), the same reduction dimensions, the same block scaling. :class:`TransposedLinear` is
``ms.Linear`` with one difference: the fp32 master keeps the Conv1D layout, so the state dict
has the keys and shapes of the module it replaced (a converted GPT-2 checkpoint still loads into
an unconverted GPT-2, and ``save_pretrained`` writes what GPT-2 readers expect). Every GEMM
reads :meth:`gemm_weight`, the ``[out, in]`` contiguous copy of the master: the very fp32 values
an ``nn.Linear`` holding ``Wᵀ`` would have, so codes, scales, outputs and input gradients are
bit-identical to ``ms.Linear.from_linear`` of that ``nn.Linear``; the weight gradient is the
same matrix, transposed back by autograd into the master's layout.

The copy costs one ``in × out`` fp32 read and write per call, less than the quantization that
reads the weight anyway.
"""

from __future__ import annotations

import math
import sys

import torch
from torch import nn

from ..recipe import Recipe
from .linear import Linear

__all__ = ["TransposedLinear", "conv1d_type", "is_conv1d"]


def conv1d_type() -> type | None:
    """``transformers.pytorch_utils.Conv1D`` if transformers is already imported, else None.

    A model that holds Conv1D layers imported transformers to build them, so looking in
    ``sys.modules`` finds the class without importing transformers from microscale.
    """
    module = sys.modules.get("transformers.pytorch_utils")
    return getattr(module, "Conv1D", None)


def is_conv1d(module: nn.Module) -> bool:
    cls = conv1d_type()
    return cls is not None and isinstance(module, cls)


class TransposedLinear(Linear):
    """``ms.Linear`` storing its fp32 master ``weight`` as ``[in, out]`` (HF ``Conv1D``).

    Same arguments and switches as :class:`~microscale.Linear`; build one from a Conv1D with
    :meth:`from_conv1d` (``ms.convert`` does).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: str | Recipe = "nvfp4", device=None, **kwargs):
        super().__init__(in_features, out_features, bias, recipe, device, **kwargs)
        self.weight = nn.Parameter(self.weight.detach().t().contiguous())

    def gemm_weight(self) -> torch.Tensor:
        return self.weight.t().contiguous()

    def reset_parameters(self) -> None:
        # nn.Linear's init, whatever the layout: kaiming_uniform(a=√5) is U(±1/√in)
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_conv1d(cls, conv: nn.Module, recipe: str | Recipe = "nvfp4",
                    **kwargs) -> "TransposedLinear":
        """A ``TransposedLinear`` with a copy of ``conv``'s parameters (as fp32 masters)."""
        weight = getattr(conv, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise TypeError(f"from_conv1d expects a Conv1D with a 2-D weight [in, out], got "
                            f"{type(conv).__name__}")
        bias = getattr(conv, "bias", None)
        in_features, out_features = weight.shape
        new = cls(in_features, out_features, bias is not None, recipe, device=weight.device,
                  **kwargs)
        with torch.no_grad():
            new.weight.copy_(weight.float())
            if bias is not None:
                new.bias.copy_(bias.float())
        new.train(conv.training)
        return new

    def extra_repr(self) -> str:
        return super().extra_repr() + ", weight_layout=[in, out]"
