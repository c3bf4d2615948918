"""Quantize the weights once per optimizer step, not once per micro-batch.

With gradient accumulation, every micro-batch of a step multiplies by the same weights, yet a
quantized layer re-quantizes its fp32 master W (both views: W for fprop, Wᵀ for dgrad) on each
forward. ``ms.weight_cache(model)`` quantizes every quantized layer's weights once, when the
block is entered, and the layers' forwards inside the block use those views::

    for step in range(steps):
        with ms.weight_cache(model):                 # W, Wᵀ quantized here, once
            for micro in micro_batches(step):
                loss_fn(model(micro)).backward()     # no weight quantization
        optimizer.step()                             # after the block: weights change again
        optimizer.zero_grad()

What it changes and what it does not:

* The views are the ones the forward would have computed (the same recipe, plan and
  arithmetic), so outputs and gradients are bit-identical to the uncached run when the
  weights are rounded deterministically (every preset's weights are RNE). With delayed
  scaling the weight's amax history advances once per block, i.e. once per optimizer step,
  as Transformer Engine does across micro-batches.
* A layer whose precision (plan) changes inside the block falls back to quantizing per call.
* The cache holds both views of every quantized weight for the duration of the block (FP8:
  2 bytes per parameter; NVFP4: about 1.1).
* The weights must not change inside the block: leaving it checks each weight's version
  counter and raises (naming the layers) if one was modified in place, because the cached
  views would then have been stale.
* FSDP2-sharded weights are gathered per forward; their quantized all-gather
  (:mod:`microscale.distributed.allgather`) is the equivalent there, so they are refused.

Compile: the cached views are ordinary tensors the compiled graph takes as inputs (a new block
brings new tensors of the same shapes: no recompilation).
"""

from __future__ import annotations

import contextlib

import torch

from ..distributed.gathered import is_gathered

__all__ = ["weight_cache"]


def _cached_layers(model: torch.nn.Module) -> list:
    from .linear import Linear
    layers = [m for m in model.modules() if isinstance(m, Linear)]
    sharded = [m._label() for m in layers if _is_sharded(m.weight)]
    if sharded:
        raise ValueError(f"weight_cache: {', '.join(sharded[:3])} hold FSDP2-sharded weights, "
                         "gathered per forward; use the quantized all-gather instead "
                         "(docs/distributed.md)")
    return [m for m in layers if m.precision != "high_precision"]


def _is_sharded(weight: torch.Tensor) -> bool:
    return type(weight).__name__ == "DTensor" or is_gathered(weight)


@contextlib.contextmanager
def weight_cache(model: torch.nn.Module):
    """Quantize the weights of ``model``'s quantized layers once, for the block's forwards."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"weight_cache expects an nn.Module, got {type(model).__name__}")
    layers = _cached_layers(model)
    try:
        versions = [layer.fill_weight_cache() for layer in layers]
        yield
    finally:
        for layer in layers:
            layer.clear_weight_cache()
    stale = [layer._label() for layer, v in zip(layers, versions)
             if layer.gemm_weight()._version != v]
    if stale:
        raise RuntimeError(f"weight_cache: the weights of {', '.join(stale[:5])} changed inside "
                           "the block, so the cached quantized views were stale; step the "
                           "optimizer after leaving the block")
