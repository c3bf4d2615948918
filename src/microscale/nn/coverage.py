"""Every GEMM accounted for: which matmul weights a conversion quantized, and which it did not.

A model's matrix multiplies do not all live in ``nn.Linear``. Besides the linears that
``ms.convert`` swaps, a model may hold:

* Hugging Face ``Conv1D`` layers (GPT-2): converted as :class:`~microscale.nn.TransposedLinear`;
* fused expert weights, 3-D parameters ``[experts, out, in]`` applied per token group
  (Mixtral, Qwen2-MoE and DeepSeek-style MoE in transformers 5): ``convert`` swaps them for
  :class:`~microscale.nn.experts.QuantizedExperts`; only a layout it cannot run is listed here;
* matrices applied with ``F.linear`` or ``@`` inside a custom module (MoE routers, some
  attention implementations, ``nn.MultiheadAttention``'s ``in_proj_weight``), convolutions.

:func:`unconverted_matmuls` lists the parameters of the last two kinds: every parameter with at
least two dimensions that belongs to a module ``convert`` cannot swap. Not every such parameter
is a GEMM weight (a learned position table is not), so the report words them as *unsupported
type* with their shape and lets the reader judge; none of them is silently dropped.

The share that matters
======================
The paper's recipe quantizes the GEMMs of the transformer *blocks*. :class:`GemmShare` counts the
weight elements of those GEMMs by outcome: quantized, kept in high precision by choice
(``keep_high_precision``, ``module_filter_fn``, the recipe's last-blocks rule), or kept for
another reason (unsupported type, too small for one block, not tileable). A large share of the
last kind means the user trains mostly in high precision without having asked for it (the
Mixtral case: 11% of the block weights quantized), so :func:`warn_if_mostly_high_precision`
warns with the numbers when it exceeds ``UNPLANNED_WARN_SHARE``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from torch import nn

from .linear import Linear
from .transposed import is_conv1d

__all__ = ["GemmShare", "gemm_dims", "unconverted_matmuls", "warn_if_mostly_high_precision",
           "UNPLANNED_WARN_SHARE"]

UNPLANNED_WARN_SHARE = 0.10     # warn above this share of block GEMM weights left out unasked

_SWAPPABLE = (nn.Linear, nn.Embedding, nn.EmbeddingBag, Linear)


def gemm_dims(mod: nn.Module) -> tuple[int, int] | None:
    """``(in_features, out_features)`` of a module ``convert`` can swap, else None."""
    if isinstance(mod, (nn.Linear, Linear)):
        return mod.in_features, mod.out_features
    if is_conv1d(mod):
        return tuple(mod.weight.shape)                     # Conv1D weight is [in, out]
    return None


def _why_unsupported(mod: nn.Module, pname: str, shape: list[int]) -> str:
    cls = type(mod).__name__
    if len(shape) == 3 and "expert" in (cls + pname).lower():
        what = "fused MoE expert weights (a grouped GEMM) in a layout microscale cannot swap"
    elif len(shape) == 2 and ("router" in cls.lower() or "gate" in cls.lower()):
        what = ("MoE router: kept in high precision on purpose (routing logits; a tiny GEMM "
                "whose rounding would move tokens between experts)")
    elif isinstance(mod, nn.modules.conv._ConvNd):
        what = "a convolution"
    elif isinstance(mod, nn.MultiheadAttention):
        what = "nn.MultiheadAttention applies it functionally"
    elif len(shape) == 2:
        what = "a matrix applied outside nn.Linear, e.g. a router"
    else:
        what = f"a {len(shape)}-D parameter outside nn.Linear"
    return f"unsupported type {cls}: {pname} {shape} ({what})"


def unconverted_matmuls(model: nn.Module, exclude: set[str] = frozenset()
                        ) -> dict[str, tuple[str, int]]:
    """``{"<module>.<param>": (reason, numel)}`` for every parameter of two or more dims that
    sits in a module ``convert`` cannot swap (see the module docstring); modules in ``exclude``
    (the ones convert decided on and reported itself) are left out."""
    from .experts import _GroupedBase

    found = {}
    for name, mod in model.named_modules():
        if isinstance(mod, (*_SWAPPABLE, _GroupedBase)) or is_conv1d(mod) or name in exclude:
            continue
        for pname, p in mod.named_parameters(recurse=False):
            if p is not None and p.dim() >= 2:
                path = f"{name}.{pname}" if name else pname
                found[path] = (_why_unsupported(mod, pname, list(p.shape)), p.numel())
    return found


@dataclass
class GemmShare:
    """Weight elements of the block GEMMs by outcome (see the module docstring)."""

    quantized: int = 0
    kept_by_choice: int = 0
    kept_other: int = 0

    @property
    def total(self) -> int:
        return self.quantized + self.kept_by_choice + self.kept_other

    @property
    def high_precision_share(self) -> float:
        return 1.0 - self.quantized / self.total if self.total else 0.0

    @property
    def unplanned_share(self) -> float:
        return self.kept_other / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        return {"quantized": self.quantized, "kept_by_choice": self.kept_by_choice,
                "kept_other": self.kept_other}

    def describe(self) -> str:
        if not self.total:
            return "block GEMM weights: none found"
        pct = lambda n: f"{100 * n / self.total:.0f}%"  # noqa: E731
        return (f"block GEMM weights: {pct(self.quantized)} quantized, "
                f"{pct(self.kept_by_choice)} kept by choice, {pct(self.kept_other)} kept for "
                f"another reason (unsupported type, too small, not tileable)")


def warn_if_mostly_high_precision(share: GemmShare, examples: list[str]) -> str | None:
    """Warn (``warnings.warn``) when the unasked-for high-precision share is large;
    returns the message, or None."""
    if share.unplanned_share <= UNPLANNED_WARN_SHARE:
        return None
    listed = "; ".join(examples[:3]) + (f"; and {len(examples) - 3} more" if len(examples) > 3
                                        else "")
    msg = (f"convert: {share.high_precision_share:.0%} of the GEMM weights in the model's "
           f"blocks stay in high precision ({share.unplanned_share:.0%} for reasons other than "
           f"keep_high_precision / module_filter_fn): {listed}. Those GEMMs train in high "
           "precision; the ConversionReport lists every layer.")
    warnings.warn(msg, UserWarning, stacklevel=3)
    return msg
