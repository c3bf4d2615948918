"""The three GEMMs of a quantized linear layer, as one ``autograd.Function`` over custom ops.

The three GEMMs
===============
A linear layer ``y = x Wᵀ + b`` with x ``[tokens, in]`` (leading dims flattened), W ``[out, in]``
and the incoming gradient dy ``[tokens, out]`` runs one GEMM forward and two backward. Every GEMM
is ``A Bᵀ`` with both operands quantized along the reduction dimension K, which is what the
block scales run along and what the tensor cores reduce over::

    fprop   y  = x  Wᵀ     A = x    [tokens, in]    B = W   [out, in]     K = in
    dgrad   dx = dy W      A = dy   [tokens, out]   B = Wᵀ  [in, out]     K = out
    wgrad   dW = dyᵀ x     A = dyᵀ  [out, tokens]   B = xᵀ  [in, tokens]  K = tokens

So every tensor is needed in two *layouts*, one per GEMM it feeds: x row-wise (along ``in``)
for fprop and column-wise (along ``tokens``, i.e. xᵀ) for wgrad; dy row-wise for dgrad and
column-wise for wgrad; W row-wise for fprop and column-wise (Wᵀ, along ``out``) for dgrad.
Each pair comes from one ``quantize_rowcol`` call, where a fused kernel reads the tensor once
and writes both views (with square 2D tiles, NVFP4 16×16 or FP8 128×128, W's column view is
exactly the transpose of its row view, SPEC §3 / §8, computed in the same pass).

**One weight view.** Where both of W's GEMMs decode NVFP4 to bf16 anyway (Hopper and older:
dequantize + bf16 GEMM, ``kernels/gemm_paths.takes_expanded``) and W and Wᵀ are the same
16×16 RNE quantization, W is quantized once, straight into the expanded form (bf16 ``value ·
tile_scale``, ``tensor.py``), and Wᵀ is its transpose, a view (:meth:`QuantizedTensor.t`): no
second view, no dequantize pass for either GEMM (the dgrad GEMM reads B as ``[K, N]``,
``kernels/gemm_alpha``). Measured on an H100 (``benchmarks/bench_weight_views.py``): a 1b
model's weights 9.4 → 4.2 ms a step. ``CONFIG["ONE_WEIGHT_VIEW"]`` (env
``MICROSCALE_ONE_WEIGHT_VIEW=0``) turns it off; the same bits either way.

Per call (forward, then backward)::

    q_x,  q_xᵀ  = quantize_rowcol(x,  fprop.a, wgrad.b)      x read once
    q_w,  q_wᵀ  = quantize_rowcol(W,  fprop.b, dgrad.b)      W read once (fp32 master)
    y           = scaled_mm(q_x, q_w)                         saved: q_xᵀ, q_wᵀ
    q_dy, q_dyᵀ = quantize_rowcol(dy, dgrad.a, wgrad.a)      dy read once
    dx          = scaled_mm(q_dy, q_wᵀ)
    dW          = scaled_mm(q_dyᵀ, q_xᵀ)                      fp32

Which format, block, rounding and RHT each operand gets is the :class:`~microscale.Recipe`'s
business (SPEC §9 for ``"nvfp4"``: x 1×16 and W 16×16 RNE in fprop, dy 1×16 with stochastic
rounding in dgrad, dyᵀ and xᵀ 1×16 after a 16-point RHT in wgrad). A GEMM whose config is not
quantized runs as a plain matmul in ``recipe.compute_dtype``.

What is kept for backward: not x but the quantized xᵀ (4.5 bits per element for NVFP4
instead of 16 for bf16) and the quantized Wᵀ; x in ``compute_dtype`` only when wgrad runs in
high precision, the fp32 W only when dgrad does (packed for ``ctx`` by :mod:`microscale.nn.saved`).

Tokens the wgrad blocks cannot tile are zero-padded up to ``recipe.required_multiples()
["tokens"]``: zero rows add nothing to ``dyᵀ x`` and their fprop/dgrad rows are sliced off.

Compile and CUDA graphs
=======================
Every quantizer and GEMM is a ``torch.library`` custom op (:mod:`microscale.ops`), every
decision here depends on shapes and on the static :class:`Plan` only, and the mutable state
(delayed-scaling histories, SR seeds) comes in as tensors. So ``torch.compile(fullgraph=True)``
traces a converted model, this Function included, into one graph, and nothing in a step reads a
device value on the host. Delayed scaling updates its history in place through the
``microscale::delayed_scaling_update_`` op (in backward too, for the gradient roles).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..distributed.gathered import gathered_views, is_gathered
from ..distributed.reduce import all_reduce_max, global_amax, local_amax
from ..gemm import gemm_factor
from ..op_specs import apply_prologue
from ..ops import delayed_scaling_update_, hp_mm, mm, quantize_views
from ..ops import expand as expand_operand
from ..ops_gemm import mm_amax
from ..quant.fp8 import FP8_MAX
from ..recipe import Rounding
from ..tensor import QFormat, QuantizedTensor
from .plan import (_TRITON, CONFIG, N_SEEDS, ROLES, Plan, alpha_gemm,  # noqa: F401 (re-exported)
                   _expand_a, decodes_b, keeps_xt_expanded, same_tiled_weight,
                   weight_pair_views, xt_amax_source)
from .saved import save_for_grads, saved_activation_bytes, saved_for_grads

__all__ = ["Plan", "QuantizedLinearFn", "linear", "ROLES", "N_SEEDS", "weight_pair_views",
           "saved_activation_bytes"]      # saved_activation_bytes: re-exported from .saved


def _views(t2d: torch.Tensor, plan: Plan, state: dict, row_role, col_role, seed,
           per_rank: bool = False, expand: tuple[bool, bool] = (False, False),
           prologue: tuple | None = None, amax: torch.Tensor | None = None,
           col_amax: torch.Tensor | None = None, col_amax_only: bool = False):
    """Row view (along the feature dim) for ``row_role`` and column view (along tokens) for
    ``col_role`` of ``t2d`` in one op call; delayed-scaling roles read and update their state.

    ``per_rank``: t2d differs between data-parallel ranks (x, dy; not W), so tensorwise FP8
    agrees on its amax over ``plan.amax_group`` (:mod:`microscale.distributed.reduce`).
    ``expand``: which views to quantize into the expanded form (:func:`_expand_a`).
    ``prologue``: ``(op, t2)``: the views of ``op(t2d, t2)`` (``op_specs.PROLOGUES``, fused into
    the quantizer where a kernel can); ``amax``: that tensor's tensorwise amax, known already
    (over the group where ``per_rank``), so no reduction runs for it. ``col_amax``: the
    NVFP4 column view's own amax, known already (:func:`xt_amax_source`'s "measured");
    ``col_amax_only``: the column view's amax alone is returned in its place, measured in the
    row view's pass (NVFP4)."""
    if row_role is None and col_role is None:
        return None, None
    group = plan.amax_group if per_rank else ""
    amax_all = amax                        # this tensor's amax over the group, computed once
    views = []
    for is_col, (role, expanded) in enumerate(((row_role, expand[0]), (col_role, expand[1]))):
        if role is None:
            views.append(None)
            continue
        op = plan.operand(role)
        # hot path: no NaN/Inf scan (a full read plus a host sync per operand); a non-finite
        # activation or gradient surfaces as a non-finite loss, which the harness stops on
        options = op.quantize_kwargs() | {"check_finite": False}
        if is_col and col_amax_only:
            views.append((op.format, options | {"amax_only": True}))
            continue
        if is_col and col_amax is not None:
            options["amax"] = col_amax
        elif not is_col and amax is not None and op.format == QFormat.NVFP4 and not op.rht:
            options["amax"] = amax              # an NVFP4 row view's amax is max|t2d|
        if expanded:
            options["expand"] = True
        if op.rounding == Rounding.STOCHASTIC:
            options["seed"] = seed
        if op.delayed:
            options["scale"] = state[f"{role}/scale"]
        elif op.format == QFormat.FP8_TENSOR and (amax is not None or group
                                                  or torch.compiler.is_compiling()):
            # current scaling with the amax taken in the graph: agreed over the group, and
            # under torch.compile fused into the kernel that produced t2d (no amax pass); the
            # quantizer derives the scale (one IEEE division, not a compiler's)
            if amax_all is None:        # of op(t2d, t2) where a prologue makes the tensor
                src = t2d if prologue is None else apply_prologue(*prologue[:1], t2d, prologue[1])
                amax_all = global_amax(src, group) if group else local_amax(src)
            options["amax"] = amax_all
        views.append((op.format, options))
    q_row, q_col = quantize_views(t2d, *views, plan.recipe.backend, *(prologue or ("", None)))
    for role, q in ((row_role, q_row), (col_role, q_col)):
        if role is not None and plan.operand(role).delayed:   # this amax feeds the next scale
            op = plan.operand(role)
            amax = all_reduce_max(q.amax, group) if group else q.amax
            delayed_scaling_update_(state[f"{role}/history"], state[f"{role}/scale"], amax,
                                    FP8_MAX[op.quantize_kwargs()["fp8_dtype"]], op.margin)
    return q_row, q_col


def one_weight_view(plan: Plan, tokens: int, shape, device: torch.device) -> bool:
    """Whether W and Wᵀ come from one expanded 16×16 quantization (the module docstring's "one
    weight view"): :func:`same_tiled_weight`, and both GEMMs (``tokens`` rows of x and dy, W
    ``shape``) decoding it to bf16."""
    if not (CONFIG["ONE_WEIGHT_VIEW"] and same_tiled_weight(plan)):
        return False
    n_out, n_in = shape
    return _expand_a(plan, "fprop", tokens, n_out, n_in, device) \
        and _expand_a(plan, "dgrad", tokens, n_in, n_out, device)


def weight_views(weight, plan: Plan, state: dict, fprop_q: bool, want_wt: bool, seed,
                 tokens: int | None = None):
    """W for fprop and Wᵀ for dgrad: quantized here from the fp32 master (once, expanded,
    where :func:`one_weight_view` says so for ``tokens`` rows); or as cached for this
    optimizer step (``state["weight/cache"]``, :mod:`microscale.nn.weight_cache`); or, when
    FSDP2 all-gathered them already quantized (:mod:`microscale.distributed.allgather`), as
    gathered (no second quantization)."""
    cached = state.get("weight/cache")
    if cached is not None and (cached[0] is not None or not fprop_q) \
            and (cached[1] is not None or not want_wt):
        return cached[0] if fprop_q else None, cached[1] if want_wt else None
    if is_gathered(weight):
        if not fprop_q:
            raise RuntimeError("this layer's weight was all-gathered quantized; fprop in high "
                               "precision needs the fp32 weight")
        q_w, q_wt = gathered_views(weight)
        return q_w, q_wt if want_wt else None
    if fprop_q and want_wt and tokens is not None \
            and one_weight_view(plan, tokens, weight.shape, weight.device):
        q_w, _ = _views(weight, plan, state, "fprop.b", None, seed, expand=(True, False))
        return q_w, q_w.t()
    return _views(weight, plan, state, "fprop.b" if fprop_q else None,
                  "dgrad.b" if want_wt else None, seed)


def _pad_tokens(t2d: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero rows up to a multiple of the wgrad block: they add nothing to ``dyᵀ x``."""
    pad = -t2d.shape[0] % multiple
    return F.pad(t2d, (0, 0, 0, pad)) if pad else t2d


def padded_sources(op: str, sources, in_features: int, multiple: int):
    """``(t2d, prologue)`` that quantize ``op(*sources)`` from the sources themselves: each as
    a token matrix padded like :func:`_pad_tokens` (padded rows give ``op(0, ...) = 0``), the
    first as the tensor and the op with the second as the quantizer's prologue."""
    srcs = [_pad_tokens(t.reshape(-1, in_features), multiple) for t in sources]
    return srcs[0], (op, srcs[1] if len(srcs) > 1 else None)


def _hp_mm(a: torch.Tensor, b: torch.Tensor, compute_dtype: torch.dtype, out_dtype) -> torch.Tensor:
    """A GEMM the plan keeps in ``compute_dtype``, as the op :func:`microscale.ops.hp_mm`."""
    return hp_mm(a, b, compute_dtype, out_dtype)


def _gemm(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype, backend: str,
          epilogue: tuple | None = None, out_amax: tuple | None = None):
    """``A Bᵀ`` in ``out_dtype``. NVFP4's per-tensor factor α (SPEC §6): where the kernels'
    GEMM applies it in its epilogue and writes ``out_dtype`` (``gemm_paths.factor_in_epilogue``),
    the op does it all; otherwise α is applied here, in the traced graph, to the op's fp32 sum,
    and under ``torch.compile`` the multiply and cast fuse into whatever consumes y (the
    residual add, relu², RoPE). Either way the reference's arithmetic in its order: one
    rounding to ``out_dtype`` (exact up to summation order). ``epilogue`` ``(op, e2)``:
    ``op(y, e2)`` of that (``op_specs.PROLOGUES``), by the op (in its kernel's epilogue where
    one takes it) or here after the cast. ``out_amax`` ``(rht, op)``: ``(y, amaxes)``, the
    NVFP4 amaxes of y (or ``op(y)``) from the α kernel's epilogue (``ops_gemm.mm_amax``), or
    None where another GEMM runs."""
    alpha = qa.fmt == qb.fmt == QFormat.NVFP4 and _alpha_in_kernel(qa, qb, out_dtype, backend)
    if out_amax is not None:
        return mm_amax(qa, qb, out_dtype, backend, epilogue, *out_amax) if alpha else \
            (_gemm(qa, qb, out_dtype, backend, epilogue), None)
    if qa.fmt == qb.fmt == QFormat.NVFP4 and not alpha:
        y = mm(qa, qb, torch.float32, backend, apply_factor=False)
        y = (y * gemm_factor(qa, qb)).to(out_dtype)
        return y if epilogue is None else apply_prologue(epilogue[0], y, epilogue[1])
    return mm(qa, qb, out_dtype, backend, epilogue=epilogue)


def _alpha_in_kernel(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype, backend: str) -> bool:
    return alpha_gemm(qa.fmt.value, qb.fmt.value, qa.rows, qb.rows, qa.cols, out_dtype,
                      qa.device, backend)


def _fprop(x2d, weight, bias, plan: Plan, state: dict, seeds, want_xt: bool, want_wt: bool,
           recompute: tuple | None = None, xt_amax: bool = False, y_amax: tuple | None = None,
           x_amax: tuple | None = None):
    """``y = x Wᵀ + b``; also the quantized xᵀ (for wgrad) and Wᵀ (for dgrad) when asked, and
    with ``xt_amax`` (``want_xt`` off) the amax forward can hand the xᵀ that backward
    recomputes (:func:`xt_amax_source`: fprop's amax of x, or xᵀ's own, measured in the pass
    that measures fprop's; None where neither serves). ``recompute`` ``(op, sources)`` with ``x = op(*sources)``:
    x's views are quantized from the sources, the op applied as the quantizer loads them
    (``op_specs.PROLOGUES``), so a compiled graph need not write x at all
    (``nn.recompute``). ``x_amax`` ``(row, col)``: x's and xᵀ's NVFP4 amaxes, known (no amax
    pass); ``y_amax`` ``(rht, op)``: y is ``(y, amaxes)`` (:func:`_gemm`'s; None with a bias).
    Returns ``(y, q_xt, q_wt, xt_amax)``."""
    recipe, tokens = plan.recipe, x2d.shape[0]
    fprop_q = plan.quantized("fprop") and tokens > 0
    source = xt_amax_source(plan) if xt_amax and fprop_q and not want_xt else None
    measure_xt = source == "measured"
    multiple = recipe.required_multiples()["tokens"]
    if recompute is not None and (fprop_q or want_xt):
        x_pad, prologue = padded_sources(*recompute, x2d.shape[1], multiple)
    else:
        x_pad = _pad_tokens(x2d, multiple) if fprop_q or want_xt else x2d
        prologue = None
    expand_x = fprop_q and _expand_a(plan, "fprop", x_pad.shape[0], weight.shape[0],
                                     x_pad.shape[1], x2d.device)
    expand_xt = want_xt and keeps_xt_expanded(plan.operand("wgrad.b").format, x_pad.shape[1]) \
        and _expand_a(plan, "wgrad", weight.shape[0], x_pad.shape[1], x_pad.shape[0], x2d.device)
    given = x_amax if x_amax is not None and fprop_q else (None, None)
    measure = measure_xt and given[0] is None
    q_x, q_xt = _views(x_pad, plan, state, "fprop.a" if fprop_q else None,
                       "wgrad.b" if want_xt or measure else None,
                       None if seeds is None else seeds[0:1], per_rank=True,
                       expand=(expand_x, expand_xt), prologue=prologue, col_amax_only=measure,
                       amax=given[0], col_amax=given[1] if want_xt else None)
    q_xt = given[1] if measure_xt and not measure else q_xt     # xᵀ's amax, given
    q_w, q_wt = weight_views(weight, plan, state, fprop_q, want_wt,
                             None if seeds is None else seeds[1:2], tokens=x_pad.shape[0])
    amaxes = None
    if fprop_q and y_amax is not None and bias is None:
        y, amaxes = _gemm(q_x, q_w, x2d.dtype, recipe.backend, None, y_amax)
        y = y[:tokens]
    elif fprop_q:
        y = _gemm(q_x, q_w, x2d.dtype, recipe.backend)[:tokens]
    else:
        y = _hp_mm(x2d, weight.t(), recipe.compute_dtype, x2d.dtype)
    if bias is not None:
        y = y + bias.to(y.dtype)
    y = y if y_amax is None else (y, amaxes)
    if measure_xt:
        return y, None, q_wt, q_xt
    return y, q_xt, q_wt, (q_x.amax if source == "fprop" else None)


class QuantizedLinearFn(torch.autograd.Function):
    """The three GEMMs of a linear layer, each as the plan's recipe says."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, plan: Plan, state: dict, seeds):
        recipe, tokens = plan.recipe, x2d.shape[0]
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.dgrad_q = need_dx and plan.quantized("dgrad") and tokens > 0
        ctx.wgrad_q = need_dw and plan.quantized("wgrad") and tokens > 0
        y, q_xt, q_wt, _ = _fprop(x2d, weight, bias, plan, state, seeds, ctx.wgrad_q,
                                  ctx.dgrad_q)
        x_hp = [x2d.to(recipe.compute_dtype)] if need_dw and not ctx.wgrad_q else []
        w_hp = [weight] if need_dx and not ctx.dgrad_q else []
        save_for_grads(ctx, plan, state, x2d, bias, seeds, q_xt, q_wt, x_hp + w_hp)
        return y

    @staticmethod
    def backward(ctx, dy2d):
        with torch.autocast(dy2d.device.type, enabled=False):   # exact fp32 GEMM emulation
            return QuantizedLinearFn._backward(ctx, dy2d)

    @staticmethod
    def _backward(ctx, dy2d):
        _, q_xt, q_wt, hp, seeds = saved_for_grads(ctx)
        x_hp = hp[0] if ctx.needs_input_grad[1] and not ctx.wgrad_q else None
        w_hp = hp[-1] if ctx.needs_input_grad[0] and not ctx.dgrad_q else None
        dx, dw, db = linear_grads(ctx, dy2d, q_xt, q_wt, x_hp, w_hp, seeds, ctx.needs_input_grad[:3])
        return dx, dw, db, None, None, None


def linear_grads(ctx, dy2d, q_xt, q_wt, x_hp, w_hp, seeds, needs, dy_prologue=None,
                 dx_epilogue=None, dx_amax=None, dy_amax=None):
    """dgrad, wgrad and the bias gradient of a linear layer from dy and what forward kept:
    the quantized xᵀ / Wᵀ where those GEMMs are quantized, else x / W in high precision.
    ``ctx`` carries ``plan, state, dgrad_q, wgrad_q, x_dtype, in_features, has_bias``;
    ``needs`` is ``(dx, dW, db)`` wanted. ``dy_prologue`` ``(op, t2)``: the layer's dy is
    ``op(dy2d, t2)`` (``op_specs.PROLOGUES``), quantized from dy2d and t2 as the kernels load
    them (``nn.mlp``); computed first where a GEMM or the bias takes dy in high precision.
    ``dx_epilogue`` ``(op, t2)``: the returned dx is ``op(dx, t2)`` (t2 shaped like dx), in
    the dgrad GEMM's epilogue where its kernel takes one (``nn.mlp``'s ``du``). ``dx_amax``
    ``(rht, op)``: dx comes back as ``(dx, its NVFP4 amaxes or None)`` (:func:`_gemm`); ``dy_amax``
    ``(row, col)``: dy's NVFP4 amaxes, known already (no amax pass for its views)."""
    plan, recipe = ctx.plan, ctx.plan.recipe
    need_dx, need_dw, need_db = needs
    if dy_prologue is not None and ((need_dx and not ctx.dgrad_q) or (need_dw and not ctx.wgrad_q)
                                    or (need_db and ctx.has_bias)):
        dy2d, dy_prologue = apply_prologue(dy_prologue[0], dy2d, dy_prologue[1]), None
    tokens = dy2d.shape[0]
    multiple = recipe.required_multiples()["tokens"]
    dy_pad = _pad_tokens(dy2d, multiple) if ctx.dgrad_q or ctx.wgrad_q else dy2d
    prologue = None if dy_prologue is None else \
        (dy_prologue[0], _pad_tokens(dy_prologue[1].reshape(dy2d.shape), multiple))
    # one pass over dy: row-wise for dgrad (K = out), column-wise dyᵀ for wgrad (K = tokens)
    t_pad, n_out = dy_pad.shape
    n_in = ctx.in_features
    expand = (ctx.dgrad_q and _expand_a(plan, "dgrad", t_pad, n_in, n_out, dy2d.device),
              ctx.wgrad_q and _expand_a(plan, "wgrad", n_out, n_in, t_pad, dy2d.device))
    q_dy, q_dyt = _views(dy_pad, plan, ctx.state, "dgrad.a" if ctx.dgrad_q else None,
                         "wgrad.a" if ctx.wgrad_q else None,
                         None if seeds is None else seeds[2:3], per_rank=True, expand=expand,
                         prologue=prologue, amax=None if dy_amax is None else dy_amax[0],
                         col_amax=None if dy_amax is None else dy_amax[1])
    del prologue
    dx = dw = db = dx_amaxes = None
    if need_dx and ctx.dgrad_q:  # dgrad: dy [tokens, out] · Wᵀ [in, out], both along `out`
        epi = None if dx_epilogue is None else \
            (dx_epilogue[0], _pad_tokens(dx_epilogue[1].reshape(tokens, n_in), multiple))
        dx, dx_amaxes = _gemm(q_dy, q_wt, ctx.x_dtype, recipe.backend, epi, dx_amax) \
            if dx_amax is not None else (_gemm(q_dy, q_wt, ctx.x_dtype, recipe.backend, epi), None)
        dx = dx[:tokens]
    elif need_dx:
        dx = _hp_mm(dy2d, w_hp, recipe.compute_dtype, ctx.x_dtype)
        if dx_epilogue is not None:
            dx = apply_prologue(dx_epilogue[0], dx, dx_epilogue[1].reshape(dx.shape))
    if need_dw and ctx.wgrad_q and decodes_b(plan, "wgrad", q_xt, n_out, t_pad):
        q_xt = expand_operand(q_xt, recipe.backend)
    if need_dw:          # wgrad: dyᵀ [out, tokens] · xᵀ [in, tokens], both along `tokens`
        dw = _gemm(q_dyt, q_xt, torch.float32, recipe.backend) if ctx.wgrad_q else \
            _hp_mm(dy2d.t(), x_hp, recipe.compute_dtype, torch.float32)
    if need_db and ctx.has_bias:
        db = dy2d.float().sum(0)
    return ((dx, dx_amaxes) if dx_amax is not None else dx), dw, db


def linear(x2d: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, plan: Plan,
           state: dict, seeds: torch.Tensor | None, needs_grad: bool) -> torch.Tensor:
    """``y = x Wᵀ + b`` with the plan's quantized GEMMs; ``seeds`` is int32 ``[N_SEEDS]`` when
    the plan rounds stochastically, ``state`` the delayed-scaling tensors by
    ``"<role>/history"`` and ``"<role>/scale"``."""
    if plan.fprop_hp and plan.grads_hp:
        if is_gathered(weight):
            raise RuntimeError("this layer's weight was all-gathered quantized; high precision "
                               "needs the fp32 weight")
        return _hp_linear(x2d, weight, bias, plan.recipe.compute_dtype)
    with torch.autocast(x2d.device.type, enabled=False):   # exact fp32 GEMM emulation
        if needs_grad:
            return QuantizedLinearFn.apply(x2d, weight, bias, plan, state, seeds)
        return _fprop(x2d, weight, bias, plan, state, seeds, False, False)[0]


def _hp_linear(x2d: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               compute_dtype: torch.dtype) -> torch.Tensor:
    """Every GEMM in ``compute_dtype`` (a switched or unquantized layer): plain differentiable
    ops, as ``nn.Linear`` under autocast. Not :class:`QuantizedLinearFn` with nothing
    quantized: Inductor compiled that Function's all-high-precision backward to zero gradients
    on CUDA (torch 2.11, H100; ``benchmarks/diag_hp_compile_gpu.py``; session 9)."""
    with torch.autocast(x2d.device.type, enabled=False):
        y = (x2d.to(compute_dtype) @ weight.t().to(compute_dtype)).to(x2d.dtype)
        return y if bias is None else y + bias.to(y.dtype)
