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
  2 bytes per parameter; NVFP4 16×16 weights: 2.06, W expanded in bf16 and its tile
  scales, the view both GEMMs read; MXFP8 weights: 4.06, W and Wᵀ expanded, what the
  Hopper GEMMs read, where the model's weights are small (mean ≤
  ``CONFIG["GROUP_MAX_MEAN_NUMEL"]``),
  else codes, 2.06; other NVFP4 weights: about 1.1).
* The weights must not change inside the block: leaving it checks each weight's version
  counter and raises (naming the layers) if one was modified in place, because the cached
  views would then have been stale.
* FP8 128×128 weights (``fp8_blockwise``) are quantized all in one launch
  (:mod:`microscale.ops_many`): a 125m model's 120 weights cost ~2.2 ms a step one by one on
  an H100, mostly launch and tail. NVFP4 16×16 weights (``nvfp4``, ``nvfp4_no_sr``) all in
  two (their amaxes, then each W once, expanded: both GEMMs read it, dgrad as its transpose,
  so no GEMM decodes W per micro-batch). MXFP8 weights (``mxfp8``) all in one, W and Wᵀ
  written expanded where both GEMMs would decode them (``CONFIG["EXPAND_MXFP8"]``,
  :func:`~microscale.nn.plan.cacheable_expanded_mx8`; Hopper) and the weights are small, so
  neither GEMM runs a dequantize pass. The others are quantized layer by layer.
* FSDP2-sharded weights are gathered per forward; their quantized all-gather
  (:mod:`microscale.distributed.allgather`) is the equivalent there, so they are refused.

Compile: the cached views are ordinary tensors the compiled graph takes as inputs (a new block
brings new tensors of the same shapes: no recompilation).
"""

from __future__ import annotations

import contextlib

import torch

from ..distributed.gathered import is_gathered
from ..tensor import QFormat
from .plan import cacheable_expanded_mx8, cacheable_one_view

__all__ = ["weight_cache", "groups_weights", "CONFIG"]


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


def _fill(layers: list) -> list[int]:
    """Fill every layer's cache; returns the weights' version counters. Layers whose W / Wᵀ
    pairs the many-tensor op takes (FP8 128×128, NVFP4 16×16 or MXFP8 both ways, same options,
    dtype, device and backend) are quantized together, one op call per group
    (:mod:`microscale.ops_many`); the rest one layer at a time."""
    from ..ops_many import quantize_views_many
    versions: dict[int, int] = {}
    groups: dict[tuple, list] = {}
    small = _small([layer.gemm_weight().numel() for layer in layers])
    for i, layer in enumerate(layers):
        keyed = _many_key(layer, small)
        if keyed is None:
            versions[i] = layer.fill_weight_cache()
            continue
        key, (plan, row, col) = keyed
        groups.setdefault(key, []).append((i, layer, plan, row, col))
    for members in groups.values():
        _, _, plan, row, col = members[0]
        with torch.no_grad():
            pairs = quantize_views_many([m[1].gemm_weight() for m in members], row, col,
                                        plan.recipe.backend)
        for (i, layer, plan_i, _, _), (q_w, q_wt) in zip(members, pairs):
            versions[i] = layer.set_weight_cache(plan_i, q_w, q_wt)
    return [versions[i] for i in range(len(layers))]


# GROUP_MAX_MEAN_NUMEL: grouping pays where launches and tails dominate, small weights. Measured
# on an H100 (session 8): 125m (0.2-2.4M parameters a weight) fp8_blockwise 0.876x -> 0.904x of
# bf16 with grouping; 1b (1-17M) no gain (1.124x either way) for ~1 GB more peak memory (both
# views of every weight held through the step).
# GROUP_FORMATS: the formats whose grouping pays without gradient accumulation
# (groups_weights). NVFP4 was left out until session 56: at 125m its two launches took 0.67 ms
# against 1.0 ms for the weights one by one, yet the step ran 0.5% slower grouped, twice
# (H100, session 26 calls 1-2, both orders: 0.703x / 0.707x, 0.710x / 0.715x of bf16;
# profiled, the GEMMs and Inductor's kernels each ~0.3 ms slower with the cached views as
# graph inputs). Under gradient accumulation ms.weight_cache still quantized NVFP4 weights all
# at once (once a step instead of once a micro-batch). MXFP8 since session 45: at 125m its 120
# weight pairs took 0.84 ms a step one by one and the GEMMs 0.55 ms more decoding them; grouped
# and expanded, 0.31 ms and none: 125m mxfp8 0.826-0.831x -> 0.843-0.847x of bf16 (H200,
# session 45 calls 1-3).
# NVFP4 again in session 55 (H200), its two launches aligned (2.80 ms for the 1b weights
# against 3.33 one by one; 0.63 against 1.03 at 125m): 125m 0.7843x / 0.7846x against
# 0.7830x / 0.7833x per layer, 1b 0.9029x / 0.8969x against 0.8993x / 0.9068x / 0.9000x:
# level within the rows' spread. Session 56 (H200), Wᵀ's scale bytes written by the many kernel
# (125m's fill 0.63 -> 0.36 ms): 125m 0.7960x / 0.7958x / 0.7956x grouped against 0.7876x /
# 0.7875x / 0.7905x per layer, alternated in one process (+0.9%; call 3: +0.8% at 125m, +1.3%
# at 50m, level at 350m), so NVFP4 is in; 1b's mean weight (7.3M) stays over
# GROUP_MAX_MEAN_NUMEL (its A/B read level).
# EXPAND_MXFP8: grouped MXFP8 weights written expanded (cacheable_expanded_mx8).
# Session 46 (H200, bench_many): the FP8 many kernel now runs the register tile
# (quant_many.fp8_w128_many_kernel): 125m's weights 0.72 -> 0.21 ms (85% of the copy rate),
# 125m fp8_blockwise 0.912 -> 0.928x (call 6); 1b's 1.41 ms in one launch (88%) against 2.68 ms
# one weight at a time, not yet timed in a 1b step (~0.9 GB more peak memory), so the bound
# stays (bench_train's @group-all lifts it).
CONFIG = {"GROUP_FORMATS": frozenset({QFormat.FP8_BLOCK, QFormat.MXFP8_E4M3,
                                      QFormat.MXFP8_E5M2, QFormat.NVFP4}),
          "EXPAND_MXFP8": True, "GROUP_MAX_MEAN_NUMEL": 4 << 20}


def groups_weights(model: torch.nn.Module) -> bool:
    """Whether to run a training step inside :func:`weight_cache` without gradient
    accumulation: it would quantize two or more of ``model``'s weights in one call, in a format
    where that pays (``GROUP_FORMATS``: FP8 128×128, MXFP8 and NVFP4 16×16 weights, one or
    two launches instead of one or two per layer), and they are small enough (mean size ≤
    ``CONFIG["GROUP_MAX_MEAN_NUMEL"]``). False for FSDP2-sharded models."""
    try:
        layers = _cached_layers(model)
    except ValueError:                                   # sharded: gathered per forward
        return False
    keyed = [(k[0], layer.gemm_weight().numel()) for layer in layers
             if (k := _many_key(layer, True)) is not None
             and k[1][1][0] in CONFIG["GROUP_FORMATS"]]
    keys = [k for k, _ in keyed]
    return _small([n for _, n in keyed]) and any(keys.count(k) > 1 for k in set(keys))


def _small(sizes: list[int]) -> bool:
    """Whether weights of these sizes average at most ``CONFIG["GROUP_MAX_MEAN_NUMEL"]``: where
    grouping pays (:func:`groups_weights`) and the cache holds MXFP8 weights expanded (4 bytes a
    parameter through the step, no decode per GEMM) rather than as codes (2.06 bytes; a 1b
    model under gradient accumulation keeps ~1.8 GB less so, for a decode of W and Wᵀ per
    micro-batch)."""
    return bool(sizes) and sum(sizes) / len(sizes) <= CONFIG["GROUP_MAX_MEAN_NUMEL"]


def _many_key(layer, small: bool):
    """``(group key, (plan, row view, column view))`` when the many-tensor op takes this
    layer's W / Wᵀ pair; layers with equal keys are quantized in one call. Else None. MXFP8
    views are asked expanded where the model's weights are ``small`` (:func:`_small`) and
    both GEMMs would decode them."""
    from ..ops_many import many_supported
    views, w = layer.weight_cache_views(), layer.gemm_weight()
    if views is None or not w.is_contiguous() or not many_supported(*views[1:], w.shape):
        return None
    plan, row, col = views
    if row[0] == QFormat.NVFP4 and not cacheable_one_view(plan, w.device):
        return None
    if row[0].is_mx8 and small and CONFIG["EXPAND_MXFP8"] \
            and cacheable_expanded_mx8(plan, w.shape, w.device):
        row, col = ((v[0], {**v[1], "expand": True}) for v in (row, col))
    return (view_key(row), view_key(col), w.dtype, w.device, plan.recipe.backend), \
        (plan, row, col)


def view_key(view: tuple) -> tuple:
    """A hashable key of a ``(format, options)`` view."""
    fmt, opts = view
    return fmt, tuple(sorted((k, str(v)) for k, v in opts.items()))


@contextlib.contextmanager
def weight_cache(model: torch.nn.Module):
    """Quantize the weights of ``model``'s quantized layers once, for the block's forwards."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"weight_cache expects an nn.Module, got {type(model).__name__}")
    layers = _cached_layers(model)
    try:
        versions = _fill(layers)
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
