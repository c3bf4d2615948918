"""A linear layer whose input is an elementwise op of tensors backward keeps anyway: recompute
the input's wgrad view in backward instead of keeping it from forward.

Why
===
In an MLP, ``y = W_down · act(u)``, two things are kept for backward: what the activation's
backward needs (relu²: ``r = relu(u)``; SwiGLU: ``silu(g)`` and ``u``, bf16) and what the down
projection's wgrad needs (the quantized column view of ``s = act(u)``: 1 byte per element for
FP8, 4.5 bits for NVFP4). The first set determines ``s`` exactly, so keeping the second is
redundant: here backward recomputes ``s = op(*sources)`` (one elementwise op, bit-identical to
forward's) and quantizes its column view then. At the 1b zoo model (8 × 2048 tokens, d_ff 8192)
that view is 134 MB per layer for FP8, 2.7 GB over 20 layers (``benchmarks/bench_memory.py``:
it was the largest per-layer item an FP8 step kept beyond what bf16 keeps).

Cost: forward quantizes only the row view (fprop), backward the column view of the
recomputed ``s``. Both quantize from the sources, the op applied as the quantizer loads them
where a kernel can (``op_specs.PROLOGUES``: the FP8 1x128 and MXFP8 register kernels writing
one view alone, NVFP4's reg pass and its amax pass, and the tensorwise cast pass), and the
column view takes its amax from forward where one serves (``nn.function.xt_amax_source``:
a tensorwise view forward's amax of ``s``; an NVFP4 view its own RHT'd amax, which forward's
amax pass measures beside the row view's, one more 0-d tensor kept), so under
``torch.compile`` ``s`` is never written in bf16; elsewhere (MXFP8 off whole 128x128 tiles,
the reference) the op runs first, with the same bits. An MXFP8 or NVFP4 column view
recomputed in backward is written expanded (bf16 ``value · block scale``, the wgrad GEMM's
operand on Hopper), so it also saves the decode pass the kept codes took. Measured on an H100
(whole step in one CUDA graph, ratio to compiled bf16 in the same process;
``benchmarks/results/h100_20261125_session13/``, call 4): at 1b, peak memory 0.863× →
0.794-0.796× for fp8_tensorwise 1.192× → 1.179× and fp8_blockwise 1.115× → 1.099× (with the op
computed first, call 1: 1.214× → 1.167× and 1.126× → 1.099×). Session 15 (call 5, one
process): fp8_tensorwise 1.190× → 1.195× (0.859× → 0.792× memory), fp8_blockwise 1.125× →
1.110× (0.866× → 0.797×), within a percent; at 125m (call 8) 0.951× → 0.936× and 0.902× →
0.874×. So the switch's default (``None``) is on where xᵀ's wgrad view is FP8 tensorwise or
blockwise and the layer is at least 2048 wide (:data:`AUTO_MIN_OUT`: issue 11's ≤ 0.8× memory
target at 1b, 125m's speed kept), off elsewhere. MXFP8 joined in session 25 (H100,
``h100_20261127_session25/`` call 1, one process): at 1b 0.949× → 0.942× for 0.853× → 0.777×
memory (session 15's MXFP8 recompute, the op run first and the view decoded, lost 5%: 0.858×
→ 0.812×); at 125m, forced on, 0.799× → 0.789× (0.837× → 0.746× memory), so the width rule
stays. NVFP4 joined in session 38, at every width: its reg pass writes the recomputed
column view expanded (session 37), relu² applied as it loads, and since session 38 with
forward's amax (before, a second amax pass over ``u``: 0.5-1.8% slower on an H100,
``h200_h100_20261128_session37/``). On an H100 (``h100_20261128_session38/``): 1b 0.9003× →
0.9023× of bf16's speed (the mean of four pairs), 350m 0.782× → 0.789×, 125m 0.755× → 0.763×,
50m 0.724× → 0.731×, for 0.84× / 0.81× / 0.80× / 0.81× → 0.80× / 0.76× / 0.76× / 0.76× of its
peak memory (:data:`AUTO_ANY_WIDTH`).

How
===
``linear_from(layer, op, *sources)`` computes ``x = op(*sources)`` as usual (so forward hooks,
analysis and a high-precision fallback see the real input) and calls ``layer(x, recompute=(op,
sources))``. When the layer's ``recompute_input`` switch is on (by default where xᵀ is FP8
tensorwise, blockwise or MXFP8 in a layer at least 2048 wide, or NVFP4;
:func:`set_recompute_input`) and its wgrad is quantized with a plain column view (current
scaling, round-to-nearest: every preset), :class:`RecomputedInputLinearFn` runs fprop from
``x``, keeps the *sources* (not ``x``, not its column view; plus the amax forward took for
xᵀ, :func:`~microscale.nn.function.xt_amax_source`) and returns the gradients of the sources
itself, with the op's backward written out in the order eager autograd computes it, so the
gradients are bit-identical to ``layer(op(*sources))``. Otherwise the layer runs as usual on
``x``: same numerics, the view kept. The ops (``OPS``) are one correctly rounded multiply
each, so a compiled recompute or a kernel's gives forward's bits too: ``"square"`` (``x = a²``, relu²
after the relu), ``"mul"`` (``x = a · b``, SwiGLU after the silu) and ``"relu_square"`` (``x =
relu(u)²`` from the pre-activation: the relu is never written out either, and backward keeps
``u`` where it kept ``r``; the zoo's relu² MLP, :mod:`microscale.nn.mlp`, which also fuses the up
projection's backward).
"""

from __future__ import annotations

import torch
from torch import nn

from ..op_specs import PROLOGUES
from ..recipe import Rounding
from ..tensor import QFormat
from .function import (_expand_a, _fprop, _views, linear_grads, padded_sources,
                       xt_amax_source)
from .plan import Plan
from .saved import save_for_grads, saved_for_grads

__all__ = ["OPS", "AUTO_FORMATS", "AUTO_MIN_OUT", "AUTO_ANY_WIDTH", "RecomputedInputLinearFn",
           "linear_from",
           "set_recompute_input", "can_recompute", "recompute_applies", "recompute_on",
           "recomputed_xt"]


def _square_grads(ds, a):
    return (ds * (a * 2),)                  # pow_backward: grad · (2 · a), one rounding


def _mul_grads(ds, a, b):
    return ds * b, ds * a                   # mul's backward: grad · other for each side


def _relu_square_grads(ds, u):
    return (PROLOGUES["relu_square_grad"][0](ds, u),)    # relu's and square's, in that order


# op -> (forward, backward(ds, *sources) -> grads of the sources); the forwards are the
# quantizers' prologues (op_specs.PROLOGUES), which the kernels apply as they load
OPS = {"square": (PROLOGUES["square"][0], _square_grads), "mul": (PROLOGUES["mul"][0], _mul_grads),
       "relu_square": (PROLOGUES["relu_square"][0], _relu_square_grads)}


def can_recompute(plan: Plan, needs_dw: bool, tokens: int) -> bool:
    """Whether wgrad's B operand (xᵀ) can come from a recompute in backward: wgrad quantized,
    and xᵀ's quantization stateless (no delayed-scaling history to update in forward, no SR
    seed whose stream would shift)."""
    if not (needs_dw and tokens > 0 and plan.quantized("wgrad")):
        return False
    op = plan.operand("wgrad.b")
    return not op.delayed and op.rounding != Rounding.STOCHASTIC


def recompute_applies(layer, x: torch.Tensor, recompute: tuple, plan: Plan,
                      needs_grad: bool) -> bool:
    """Whether ``layer`` (an ms.Linear, x already in its compute dtype) takes ``recompute=(op,
    sources)``; a malformed one raises whatever the switch says."""
    op, sources = recompute
    if op not in OPS or any(not isinstance(t, torch.Tensor) or t.shape != x.shape for t in sources):
        raise ValueError(f"{layer._label()}: recompute must be (op in {sorted(OPS)}, tensors "
                         f"shaped like x {tuple(x.shape)}), got ({op!r}, "
                         f"{[tuple(getattr(t, 'shape', ())) for t in sources]})")
    tokens = x.numel() // max(1, layer.in_features)
    return recompute_on(layer.recompute_input, plan, layer.out_features) and needs_grad \
        and not (plan.fprop_hp and plan.grads_hp) and all(t.dtype == x.dtype for t in sources) \
        and can_recompute(plan, layer.weight.requires_grad, tokens)


# where the switch's default (None) turns it on: xᵀ's wgrad view in FP8 tensorwise, 1x128
# blockwise or MXFP8, whose kept column view is the largest item an FP8 step keeps beyond
# bf16's and whose quantizers apply the op as they load (PROLOGUES: the recompute costs no
# bf16 pass). MXFP8 since session 25: its register kernel writes the column view alone, from
# the op's sources and expanded (the wgrad GEMM's bf16 operand, no decode pass; session 15's
# MXFP8 recompute, the op run first and the view decoded, cost 5% at 1b).
AUTO_FORMATS = (QFormat.FP8_TENSOR, QFormat.FP8_BLOCK, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2)
# ... and only in layers at least this wide: the recompute adds a pass over x (the sources
# read, the column view quantized) that the layer's GEMMs amortize over out_features. H100,
# session 15, one process each: 1b's down projection (2048 wide) fp8_tensorwise 1.190x ->
# 1.195x, fp8_blockwise 1.125x -> 1.110x (call 5); 125m's (768 wide) 0.951x -> 0.936x and
# 0.902x -> 0.874x (call 8), where bf16's memory is no constraint.
AUTO_MIN_OUT = 2048
# ... and at any width where xᵀ is NVFP4 (session 38, once the recomputed view took forward's
# amax, xt_amax_source): the kept path's x pair (both views in one launch, ~48% of the copy
# rate) and its decode pass cost more than a row view alone in forward plus a column view
# alone, expanded, in backward. H100, x bf16 kept -> recomputed (peak memory x bf16's): 1b
# 0.9048 / 0.8924 / 0.9018 / 0.9021 -> 0.9060 / 0.9009 / 0.8976 / 0.9045 (0.84 -> 0.80; calls
# 1-2, the third pair's recompute first); 350m 0.7818 -> 0.7892 / 0.7896 (0.81 -> 0.76, call
# 4); 125m 0.7552 / 0.7552 -> 0.7632 / 0.7628 (0.80 -> 0.76, call 4), nvfp4_no_sr 0.7737 ->
# 0.7819 (call 5); 50m 0.7244 -> 0.7312 (0.81 -> 0.76, call 5). Session 37's recompute, which
# measured that amax again in backward, ran 0.5-1.8% slower at 1b. Not MXFP4 (no global
# amax to keep): 125m 0.7334 -> 0.6999 forced on (call 5).
AUTO_ANY_WIDTH = (QFormat.NVFP4,)


def recompute_on(switch: bool | None, plan: Plan, out_features: int) -> bool:
    """The layer's ``recompute_input``: True/False as set; None (the default) on where wgrad's
    xᵀ is FP8 tensorwise, blockwise or MXFP8 (:data:`AUTO_FORMATS`) and the layer is at least
    :data:`AUTO_MIN_OUT` wide, or xᵀ is NVFP4 (:data:`AUTO_ANY_WIDTH`)."""
    if switch is not None:
        return bool(switch)
    if not plan.quantized("wgrad"):
        return False
    fmt = plan.operand("wgrad.b").format
    return fmt in AUTO_ANY_WIDTH or (out_features >= AUTO_MIN_OUT and fmt in AUTO_FORMATS)


class RecomputedInputLinearFn(torch.autograd.Function):
    """``y = x Wᵀ + b`` with ``x = op(*sources)``; keeps the sources, recomputes xᵀ."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, plan: Plan, state: dict, seeds, op: str, *sources):
        need_dx = any(ctx.needs_input_grad[7:])
        ctx.dgrad_q = need_dx and plan.quantized("dgrad") and x2d.shape[0] > 0
        ctx.wgrad_q = True                     # can_recompute said so
        y, _, q_wt, x_amax = _fprop(x2d, weight, bias, plan, state, seeds, False, ctx.dgrad_q,
                                    recompute=(op, sources), xt_amax=True)
        w_hp = [weight] if need_dx and not ctx.dgrad_q else []
        # xᵀ takes its amax from forward where it can (xt_amax_source: a tensorwise xᵀ
        # forward's amax of x, an NVFP4 one its own, measured beside fprop's): no amax pass
        ctx.reuse_amax = x_amax is not None
        head = (*sources, x_amax) if ctx.reuse_amax else sources
        save_for_grads(ctx, plan, state, x2d, bias, seeds, None, q_wt, w_hp, head=head)
        ctx.op = op
        return y

    @staticmethod
    def backward(ctx, dy2d):
        with torch.autocast(dy2d.device.type, enabled=False):   # exact fp32 GEMM emulation
            return RecomputedInputLinearFn._backward(ctx, dy2d)

    @staticmethod
    def _backward(ctx, dy2d):
        head, _, q_wt, hp, seeds = saved_for_grads(ctx)
        sources, x_amax = (head[:-1], head[-1]) if ctx.reuse_amax else (head, None)
        q_xt = recomputed_xt(ctx.op, sources, ctx.in_features, ctx.plan, ctx.state, seeds,
                             dy2d.shape[-1], amax=x_amax)
        need_dx = any(ctx.needs_input_grad[7:])
        w_hp = hp[-1] if need_dx and not ctx.dgrad_q else None
        dx, dw, db = linear_grads(ctx, dy2d, q_xt, q_wt, None, w_hp, seeds,
                                  (need_dx, ctx.needs_input_grad[1], ctx.needs_input_grad[2]))
        del q_xt
        grads = OPS[ctx.op][1](dx.reshape(sources[0].shape), *sources) if need_dx \
            else (None,) * len(sources)
        return (None, dw, db, None, None, None, None, *grads)


def recomputed_xt(op: str, sources, in_features: int, plan: Plan, state: dict, seeds,
                  out_features: int, amax: torch.Tensor | None = None):
    """wgrad's xᵀ view of ``x = op(*sources)``, quantized in backward: forward's x, bit for
    bit, the op applied by the quantizer as it loads the sources (fused where a kernel can,
    ``op_specs.PROLOGUES``); ``amax``: the amax forward kept for it (``nn.function.
    xt_amax_source``: its tensorwise amax of x, or xᵀ's NVFP4 amax measured beside fprop's). The
    view is consumed at once, so it is quantized straight into the bf16 ``value ·
    block_scale`` form where the wgrad GEMM decodes to it (:func:`_expand_a`'s rule, as for
    the A operands: MXFP8 and FP4; MXFP8's register kernel and NVFP4's reg pass write it, the
    op applied as they load): no decode pass."""
    src_pad, prologue = padded_sources(op, sources, in_features,
                                       plan.recipe.required_multiples()["tokens"])
    expand = _expand_a(plan, "wgrad", out_features, in_features, src_pad.shape[0],
                       src_pad.device)
    measured = amax is not None and xt_amax_source(plan) == "measured"
    return _views(src_pad, plan, state, None, "wgrad.b", None if seeds is None else seeds[0:1],
                  per_rank=True, expand=(False, expand), prologue=prologue,
                  amax=None if measured else amax, col_amax=amax if measured else None)[1]


def set_recompute_input(model: nn.Module, on: bool | None = True) -> int:
    """Set ``recompute_input`` on every :class:`~microscale.Linear` of ``model`` (``None``:
    back to the default, on for FP8, MXFP8 and NVFP4 wgrad views); returns how many layers (only
    those called through :func:`linear_from` are affected)."""
    from .linear import Linear
    layers = [m for m in model.modules() if isinstance(m, Linear)]
    for m in layers:
        m.recompute_input = None if on is None else bool(on)
    return len(layers)


def linear_from(layer: nn.Module, op: str, *sources: torch.Tensor) -> torch.Tensor:
    """``layer(op(*sources))``, where a quantized :class:`~microscale.Linear` with
    ``recompute_input`` on keeps ``sources`` for backward instead of the quantized column view
    of its input (the module docstring). Any other module is simply called on ``op(*sources)``."""
    if op not in OPS:
        raise ValueError(f"linear_from: op must be one of {sorted(OPS)}, got {op!r}")
    x = OPS[op][0](*sources)
    from .linear import Linear                  # ms.Linear imports this module's Function
    if isinstance(layer, Linear):
        return layer(x, recompute=(op, sources))
    return layer(x)
