"""What a quantized linear layer keeps for backward: packed for ``ctx``, unpacked, and its size.

A layer's autograd Function (:class:`~microscale.nn.function.QuantizedLinearFn`; also
:class:`~microscale.nn.recompute.RecomputedInputLinearFn`, which keeps an op's sources as its
own ``head`` tensors instead of xᵀ) keeps for backward the quantized xᵀ (wgrad's B) and Wᵀ
(dgrad's B) where those GEMMs are quantized, else x in ``compute_dtype`` / the fp32 W, and the
SR seeds. ``ctx.save_for_backward`` takes tensors only, so a
:class:`~microscale.tensor.QuantizedTensor` is saved as its three tensors (data, scale, amax)
and its tensor-free rest (format, shape, dtype, block, RHT size, extra) stays on ``ctx``:
:func:`save_for_grads` keeps it all, :func:`saved_for_grads` gives it back for
:func:`~microscale.nn.function.linear_grads`.

:func:`saved_activation_bytes` (public as ``microscale.nn.saved_activation_bytes``) is what
that costs from x per layer at a token count; ``benchmarks/memory_saved_activations.py`` checks
it against a measurement.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from ..recipe import Recipe
from ..tensor import QuantizedTensor
from .plan import expands_pair, keeps_xt_expanded

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["save_for_grads", "saved_for_grads", "saved_activation_bytes"]


def _stash(q: QuantizedTensor | None, saved: list) -> tuple | None:
    """Append q's tensors to ``saved``; return the tensor-free rest (rebuilt by :func:`_unstash`)."""
    if q is None:
        return None
    saved += [q.data, q.scale, q.amax]
    return (q.fmt, q.shape, q.orig_dtype, q.block, q.rht_d, q.extra, q.expanded)


def _unstash(meta: tuple, tensors) -> QuantizedTensor:
    fmt, shape, orig_dtype, block, rht_d, extra, expanded = meta
    data, scale, amax = tensors
    return QuantizedTensor(fmt=fmt, data=data, scale=scale, amax=amax, shape=shape,
                           orig_dtype=orig_dtype, block=block, rht_d=rht_d, extra=extra,
                           expanded=expanded)


def save_for_grads(ctx, plan: Plan, state: dict, x2d, bias, seeds, q_xt, q_wt, hp: list,
                   head: tuple = ()) -> None:
    """What :func:`linear_grads` reads, kept on ``ctx``: ``head`` (a caller's own tensors),
    the quantized xᵀ and Wᵀ (either may be None), the high-precision ``hp`` tensors, the SR
    seeds; and the plan, state and shapes. :func:`saved_for_grads` gives them back."""
    saved = list(head)
    ctx.xt_meta, ctx.wt_meta = _stash(q_xt, saved), _stash(q_wt, saved)
    saved += hp
    if seeds is not None:
        saved.append(seeds)
    ctx.save_for_backward(*saved)
    ctx.n_head, ctx.plan, ctx.state, ctx.has_seeds = len(head), plan, state, seeds is not None
    ctx.x_dtype, ctx.has_bias, ctx.in_features = x2d.dtype, bias is not None, x2d.shape[1]


def saved_for_grads(ctx) -> tuple:
    """``(head, q_xt, q_wt, hp, seeds)`` as :func:`save_for_grads` kept them."""
    saved = list(ctx.saved_tensors)
    head, saved = saved[:ctx.n_head], saved[ctx.n_head:]
    q_xt = _unstash(ctx.xt_meta, saved[:3]) if ctx.xt_meta else None
    saved = saved[3:] if ctx.xt_meta else saved
    q_wt = _unstash(ctx.wt_meta, saved[:3]) if ctx.wt_meta else None
    saved = saved[3:] if ctx.wt_meta else saved
    seeds = saved.pop() if ctx.has_seeds else None
    return head, q_xt, q_wt, saved, seeds


def saved_activation_bytes(recipe: str | Recipe, in_features: int, tokens: int,
                           expanded: bool | None = None) -> int:
    """Bytes a layer keeps from x for backward at ``tokens`` tokens (weights not counted).

    Quantized wgrad: the packed xᵀ ``[in, tokens_padded]`` (codes, block scales, fp32 amax, and
    for tensorwise FP8 the fp32 ``scale_inv``), or for an FP4 / MXFP8 xᵀ kept expanded (bf16
    ``value · block_scale`` for the GEMM that would decode it, with its block scales and amax)
    2 bytes an element in place of the codes. ``expanded`` None: as the layer decides where
    its wgrad GEMM decodes xᵀ (off CUDA, and on Hopper; ``nn.plan.keeps_xt_expanded``; on
    Blackwell's native GEMMs xᵀ stays codes: pass False). High-precision wgrad: x in
    ``compute_dtype``.
    """
    recipe = Recipe.parse(recipe)
    op = recipe.wgrad.b
    if not recipe.wgrad.quantized:
        return in_features * tokens * torch.empty((), dtype=recipe.compute_dtype).element_size()
    mult = recipe.required_multiples()["tokens"]
    t_pad = math.ceil(tokens / mult) * mult
    n = in_features * t_pad
    fmt = op.format.value
    if expanded is None:
        expanded = keeps_xt_expanded(op.format, in_features) \
            and expands_pair(recipe.wgrad.a.format, op.format)
    if fmt in ("nvfp4", "mxfp4"):
        codes, scales = n // 2, n // op.block_size          # E4M3 or UE8M0: 1 byte each
    elif fmt.startswith("mxfp8"):
        codes, scales = n, n // op.block_size
    elif fmt == "fp8_block":
        codes, scales = n, 4 * (n // (op.block[0] * op.block[1]))
    else:  # fp8_tensor: one fp32 scale_inv
        codes, scales = n, 4
    if expanded and op.format.expandable:
        codes = 2 * n
    return codes + scales + 4                                     # + fp32 amax
