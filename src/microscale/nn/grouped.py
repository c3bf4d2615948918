"""``ms.grouped_mm``: the three GEMMs of a mixture-of-experts layer, each quantized per expert.

An MoE layer sorts its tokens by expert and multiplies each expert's rows by that expert's
weight. With ``x [T, K]`` (the sorted tokens), ``w [E, N, K]`` (one ``[out, in]`` weight per
expert, ``nn.Linear``'s layout, as Hugging Face stores fused experts) and ``offs [E]`` (int32
group *end* offsets on the device, ``offs[-1] == T``), expert e owns rows
``[offs[e-1], offs[e])`` and::

    fprop   y_e  = x_e  W_eᵀ      torch._grouped_mm(x, w.transpose(1, 2), offs=offs)
    dgrad   dx_e = dy_e W_e       groups of rows again
    wgrad   dW_e = dy_eᵀ x_e      groups along the reduction (tokens): out [E, N, K]

``ms.grouped_mm(x, w, offs, recipe)`` is a differentiable drop-in for
``torch._grouped_mm(x, w.transpose(1, 2), offs=offs)`` in which every expert's three GEMMs are
exactly those of an ``ms.Linear`` on that expert's tokens (:mod:`microscale.nn.function`):
the same operand views (x row-wise for fprop and column-wise for wgrad, W row-wise and
column-wise, dy both ways), the same recipe per operand, and per expert its own NVFP4 global
amax, its own 16×16 weight tiles, its own FP8 tensorwise scale, its own zero padding of the
tokens to the wgrad block (a group of 17 tokens ends in a partial block, an expert with no
tokens has no blocks and a zero weight gradient). Layouts: :mod:`microscale.quant.grouped`.

Stochastic rounding seeds: ``seeds`` is int64 ``[E, 3]``; row e holds the three seeds
``ms.Linear`` would draw for expert e (column 0 for x, 1 for W, 2 for dy; a column view uses
its seed + 1). With the reference backend each expert's codes are then bit-identical to
``nn.function.linear(x_e, W_e, None, plan, state, seeds[e])``; the sync-free path derives its
bytes from the same per-expert seeds with its own counter-based stream
(:func:`~microscale.quant.grouped.segment_rand_bits`), so its codes equal the reference's given
those bytes. Drawn from ``generator`` or torch's default one when not given.

Precision: as ``ms.Linear``, y and dx in x's dtype, dW fp32; a GEMM the recipe (or a precision
switch) leaves unquantized runs as ``torch._grouped_mm`` in ``recipe.compute_dtype``.
Delayed FP8 scaling keeps one history per expert and role (:class:`GroupedLinear` holds it).
"""

from __future__ import annotations

import math
import os

import torch

from ..distributed.reduce import rank_seeds
from ..ops_grouped import (
    GroupedQ,
    delayed_scaling_update_grouped_,
    factor_is_one,
    grouped_factor,
    grouped_gemm,
    grouped_gemm_out,
    hp_grouped_mm,
    quantize_grouped,
)
from ..ops_experts import quantize_experts, quantize_experts_one_view
from ..quant.fp8 import FP8_MAX
from ..quant.grouped import group_layout
from ..recipe import Recipe
from ..tensor import QFormat
from ..validate import SUPPORTED_DTYPES
from .plan import ROLES, Plan, mx8_expands, same_tiled_weight

__all__ = [
    "N_SEEDS",
    "TOKEN_ROLES",
    "GroupedMMFn",
    "check_grouped_args",
    "delayed_roles",
    "grouped_linear",
    "grouped_mm",
]

N_SEEDS = 3
TOKEN_ROLES = ("fprop.a", "dgrad.a", "wgrad.a", "wgrad.b")   # operands made of tokens


def token_multiple(recipe) -> int:
    """Each expert's tokens are zero-padded to this multiple in the wgrad (column) layout: the
    recipe's token block, and at least 16, because ``torch._grouped_mm`` grouped along K wants
    16-aligned group offsets on CUDA (an unaligned one is a device-side assert; seen on an
    H200 with fp8_delayed, m = 1). Zero tokens change no amax, block or sum."""
    return math.lcm(16, recipe.required_multiples()["tokens"])


def delayed_roles(recipe: Recipe) -> dict:
    """Role -> OperandConfig for the roles with delayed scaling."""
    out = {}
    for role in ROLES:
        gemm, operand = role.split(".")
        cfg = getattr(recipe, gemm)
        if cfg.quantized and getattr(cfg, operand).delayed:
            out[role] = getattr(cfg, operand)
    return out


def _view(plan: Plan, state: dict, role: str | None):
    """``((fmt, options), delayed scale or None)`` of one operand role, or (None, None)."""
    if role is None:
        return None, None
    op = plan.operand(role)
    return (op.format, op.quantize_kwargs() | {"check_finite": False}), \
        state.get(f"{role}/scale") if op.delayed else None


def _update(plan: Plan, state: dict, pairs, active) -> None:
    """Delayed scaling: push each quantized role's per-expert amax into its history."""
    for role, q in pairs:
        if role is not None and plan.operand(role).delayed:
            op = plan.operand(role)
            delayed_scaling_update_grouped_(state[f"{role}/history"], state[f"{role}/scale"],
                                            q.amax, active,
                                            FP8_MAX[op.quantize_kwargs()["fp8_dtype"]], op.margin)


# CONFIG["EXPAND_ROWS"]: an NVFP4 (and, since session 19, MXFP8) row view (fprop's x, dgrad's
# dy: consumed at once by the grouped GEMM, which multiplies bf16 value · block scale) is
# quantized straight into that expanded form (tensor.py), as ms.Linear does for its A
# operands, instead of codes the GEMM then decodes in a pass of its own. The same values reach
# the GEMM either way. Since session 23 also the MXFP8 experts' W (fprop's, never saved for
# backward; its Wᵀ stays codes, which backward keeps).
# CONFIG["ONE_WEIGHT_VIEW"]: the experts' W and Wᵀ from one expanded 16×16 NVFP4 quantization,
# Wᵀ a view of it (ops_experts.quantize_experts_one_view, as nn.function does for a dense W):
# the grouped GEMMs multiply bf16 value · tile scale anyway, so no second view and no decode
# pass of either. Off: two code views (bench label @grp-w-two-views); the same bits.
CONFIG = {"EXPAND_ROWS": True,
          "ONE_WEIGHT_VIEW": os.environ.get("MICROSCALE_ONE_WEIGHT_VIEW", "1") != "0"}


def _expands(fmt_a: QFormat, fmt_b: QFormat) -> bool:
    """Whether a row view in ``fmt_a`` against experts in ``fmt_b`` is asked for expanded:
    NVFP4 x NVFP4, and MXFP8 x MXFP8 where ``ms.Linear`` expands it too
    (``nn.function.CONFIG["EXPAND_MXFP8"]``; the grouped GEMM decodes both to bf16 either way)."""
    return fmt_a == fmt_b == QFormat.NVFP4 or mx8_expands(fmt_a, fmt_b)


def one_expert_view(plan: Plan) -> bool:
    """Whether the experts' W and Wᵀ come from one expanded quantization
    (``nn.plan.same_tiled_weight``; the grouped GEMMs always decode NVFP4 to bf16: there
    is no native grouped FP4 GEMM here)."""
    return CONFIG["ONE_WEIGHT_VIEW"] and same_tiled_weight(plan)


def _tokens(t2d, offs, plan, state, row_role, col_role, seeds, active):
    (row, r_scale), (col, c_scale) = _view(plan, state, row_role), _view(plan, state, col_role)
    if row is None and col is None:
        return None, None
    gemm = row_role and row_role.split(".")[0]
    if CONFIG["EXPAND_ROWS"] and row is not None and _expands(row[0],
                                                             plan.operand(f"{gemm}.b").format):
        row = (row[0], dict(row[1], expand=True))
    multiple = token_multiple(plan.recipe)
    q_row, q_col = quantize_grouped(t2d, offs, row, col, multiple, plan.recipe.backend, seeds,
                                    r_scale, c_scale)
    _update(plan, state, ((row_role, q_row), (col_role, q_col)), active)
    return q_row, q_col


def _experts(w, plan, state, row_role, col_role, seeds, active):
    (row, r_scale), (col, c_scale) = _view(plan, state, row_role), _view(plan, state, col_role)
    if row is None and col is None:
        return None, None
    if CONFIG["EXPAND_ROWS"] and row is not None and row[0] != QFormat.NVFP4 \
            and _expands(plan.operand("fprop.a").format, row[0]):
        row = (row[0], dict(row[1], expand=True))      # MXFP8 W: fprop decodes it at once
    if row is not None and col is not None and one_expert_view(plan):
        q_row, q_col = quantize_experts_one_view(w, row, plan.recipe.backend)
    else:
        q_row, q_col = quantize_experts(w, row, col, plan.recipe.backend, seeds,
                                        (r_scale, c_scale))
    _update(plan, state, ((row_role, q_row), (col_role, q_col)), active)
    return q_row, q_col


def _hp(a, b, offs, compute_dtype, out_dtype):
    """Unquantized grouped GEMM in ``compute_dtype`` (as ``ms.Linear``'s high-precision path),
    an op opaque to the compiler (``ops_grouped.hp_grouped_mm``)."""
    return hp_grouped_mm(a, b, offs, compute_dtype, out_dtype)


def _stash(q: GroupedQ | None, saved: list):
    """Append q's tensors to ``saved`` (for ``save_for_backward``); return the rest of it."""
    if q is None:
        return None
    saved += [q.data, q.scale, q.amax]
    return q.fmt, q.spec


def _unstash(meta, tensors) -> GroupedQ:
    return GroupedQ(*meta, *tensors)


def _mask_empty(dw, lay):
    return torch.where((lay.counts == 0)[:, None, None], torch.zeros_like(dw), dw)


class GroupedMMFn(torch.autograd.Function):
    """fprop / dgrad / wgrad of a grouped linear layer, each as the plan's recipe says."""

    @staticmethod
    def forward(ctx, x, w, offs, plan: Plan, state: dict, seeds):
        recipe, T = plan.recipe, x.shape[0]
        lay = group_layout(offs, T, token_multiple(recipe))
        active = lay.counts > 0
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        fprop_q = plan.quantized("fprop") and T > 0
        ctx.dgrad_q = need_dx and plan.quantized("dgrad") and T > 0
        ctx.wgrad_q = need_dw and plan.quantized("wgrad") and T > 0
        s = (lambda j: None) if seeds is None else (lambda j: seeds[:, j])
        q_x, q_xt = _tokens(x, offs, plan, state, "fprop.a" if fprop_q else None,
                            "wgrad.b" if ctx.wgrad_q else None, s(0), active)
        q_w, q_wt = _experts(w, plan, state, "fprop.b" if fprop_q else None,
                             "dgrad.b" if ctx.dgrad_q else None, s(1), active)
        if fprop_q:
            y = grouped_gemm_out(q_x, q_w, offs, grouped_factor(q_x, q_w), x.dtype,
                                 recipe.backend)
        else:
            y = _hp(x, w.transpose(1, 2), offs, recipe.compute_dtype, x.dtype)
        saved = [offs, seeds, x.to(recipe.compute_dtype) if need_dw and not ctx.wgrad_q else None,
                 w if need_dx and not ctx.dgrad_q else None]
        ctx.xt_meta, ctx.wt_meta = _stash(q_xt, saved), _stash(q_wt, saved)
        ctx.save_for_backward(*saved)
        ctx.plan, ctx.state, ctx.x_dtype = plan, state, x.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        with torch.autocast(dy.device.type, enabled=False):     # exact fp32 GEMM emulation
            return GroupedMMFn._backward(ctx, dy.contiguous())

    @staticmethod
    def _backward(ctx, dy):
        plan, recipe = ctx.plan, ctx.plan.recipe
        offs, seeds, x_hp, w_hp, *rest = ctx.saved_tensors
        q_xt = _unstash(ctx.xt_meta, rest[:3]) if ctx.xt_meta else None
        q_wt = _unstash(ctx.wt_meta, rest[-3:]) if ctx.wt_meta else None
        lay = group_layout(offs, dy.shape[0], token_multiple(recipe))
        q_dy, q_dyt = _tokens(dy, offs, plan, ctx.state, "dgrad.a" if ctx.dgrad_q else None,
                              "wgrad.a" if ctx.wgrad_q else None,
                              None if seeds is None else seeds[:, 2], lay.counts > 0)
        dx = dw = None
        if ctx.needs_input_grad[0]:    # dgrad: dy [T, N] · W_e [N, K] per group of rows
            dx = grouped_gemm_out(q_dy, q_wt, offs, grouped_factor(q_dy, q_wt), ctx.x_dtype,
                                  recipe.backend) if ctx.dgrad_q \
                else _hp(dy, w_hp, offs, recipe.compute_dtype, ctx.x_dtype)
        if ctx.needs_input_grad[1]:    # wgrad: dyᵀ [N, T] · x [T, K], groups along tokens
            if ctx.wgrad_q:
                dw = grouped_gemm(q_dyt, q_xt, lay.pad_ends, "reduce", recipe.backend)
                # a factor of one is skipped: a pass over dW (1.6 ms at DeepSeek-V3's size)
                if not factor_is_one(q_dyt, q_xt):
                    dw = dw * grouped_factor(q_dyt, q_xt)[:, None, None]
            elif dy.shape[0] == 0:       # no tokens at all: no gradient (as ms.Linear)
                dw = dy.new_zeros((offs.shape[0], dy.shape[1], x_hp.shape[1]), dtype=torch.float32)
            else:
                dw = _mask_empty(_hp(dy.t(), x_hp, offs, recipe.compute_dtype, torch.float32),
                                 lay)
        return dx, dw, None, None, None, None


def check_grouped_args(x, w, offs, where: str = "grouped_mm") -> None:
    """Shapes, dtypes and devices; offs' values on CPU (a device-side assert on CUDA: no sync)."""
    for name, t in (("x", x), ("w", w), ("offs", offs)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dim() != 2 or w.dim() != 3:
        raise ValueError(f"{where}: expected x [T, K] and w [E, N, K], got x {tuple(x.shape)} "
                         f"and w {tuple(w.shape)}")
    if x.dtype not in SUPPORTED_DTYPES or w.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{where}: x and w must be float32, bfloat16 or float16, got {x.dtype} "
                        f"and {w.dtype}")
    if x.shape[1] != w.shape[2]:
        raise ValueError(f"{where}: reduction dims differ: x has K={x.shape[1]}, w [E, N, K] "
                         f"has K={w.shape[2]}")
    if offs.dtype != torch.int32 or offs.dim() != 1 or offs.shape[0] != w.shape[0]:
        raise ValueError(f"{where}: offs must be int32 [E] = [{w.shape[0]}] (group end "
                         f"offsets), got {offs.dtype} {tuple(offs.shape)}")
    if not (x.device == w.device == offs.device):
        raise ValueError(f"{where}: x, w and offs must be on one device, got {x.device}, "
                         f"{w.device}, {offs.device}")
    _check_offs_values(offs, x.shape[0], where)


def _check_offs_values(offs, tokens: int, where: str) -> None:
    ok_sorted = (offs[1:] >= offs[:-1]).all() & (offs[:1] >= 0).all()
    ok_last = offs[-1:] == tokens
    if offs.device.type == "cpu" and not torch.compiler.is_compiling():
        if not bool(ok_sorted):
            raise ValueError(f"{where}: offs must be non-decreasing and >= 0 (group end "
                             f"offsets of tokens sorted by expert), got {offs.tolist()}")
        if not bool(ok_last.all()):
            raise ValueError(f"{where}: the last offset must equal the token count T={tokens}, "
                             f"got {int(offs[-1])}")
        return
    torch._assert_async(ok_sorted, f"{where}: offs must be non-decreasing and >= 0")
    torch._assert_async(ok_last.all(), f"{where}: the last offset must equal T = {tokens}")


def grouped_linear(x, w, offs, plan: Plan, state: dict, seeds, needs_grad: bool):
    """``y = grouped x Wᵀ`` with the plan's quantized GEMMs (autocast off inside)."""
    with torch.autocast(x.device.type, enabled=False):
        if needs_grad:
            return GroupedMMFn.apply(x, w, offs, plan, state, seeds)
        with torch.no_grad():
            return GroupedMMFn.apply(x, w, offs, plan, state, seeds)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor,
               recipe: str | Recipe = "nvfp4", *, seeds: torch.Tensor | None = None,
               generator: torch.Generator | None = None,
               state: dict | None = None) -> torch.Tensor:
    """Quantized, differentiable ``torch._grouped_mm(x, w.transpose(1, 2), offs=offs)``.

    Args:
        x: ``[T, K]`` tokens sorted by expert (float32/bfloat16/float16).
        w: ``[E, N, K]`` expert weights (``nn.Linear`` layout per expert).
        offs: int32 ``[E]`` group end offsets on x's device, non-decreasing, ``offs[-1] == T``.
        recipe: a preset name or :class:`~microscale.Recipe` (per operand, as ``ms.Linear``).
        seeds: int64 ``[E, 3]`` SR seeds (see the module docstring); drawn when None.
        generator: draws the seeds (default: torch's global generator).
        state: delayed-scaling tensors by ``"<role>/history"`` ``[E, L]`` and
            ``"<role>/scale"`` ``[E]`` (needed by ``fp8_delayed``; ``GroupedLinear`` owns them).
    Returns ``[T, N]`` in x's dtype.
    """
    recipe = Recipe.parse(recipe)
    check_grouped_args(x, w, offs)
    for role in TOKEN_ROLES:
        gemm = getattr(recipe, role.split(".")[0])
        if gemm.quantized and getattr(gemm, role.split(".")[1]).block[0] > 1:
            raise ValueError(f"grouped_mm: {role} uses 2D tiles {getattr(gemm, role[-1]).block};"
                             " tokens take 1-D blocks (a tile would span two experts)")
    state = {} if state is None else state
    missing = [r for r in delayed_roles(recipe) if f"{r}/history" not in state]
    if missing:
        raise ValueError(f"grouped_mm: recipe {recipe.name!r} uses delayed scaling ({missing}); "
                         "pass state= (or use ms.GroupedLinear, which keeps it)")
    plan = Plan(recipe)
    if seeds is None and plan.stochastic_roles():
        seeds = draw_seeds(w.shape[0], x.device, generator)
    if torch.is_autocast_enabled(x.device.type):
        x = x.to(torch.get_autocast_dtype(x.device.type))
    needs_grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
    return grouped_linear(x, w, offs, plan, state, seeds, needs_grad)


def draw_seeds(n_experts: int, device, generator: torch.Generator | None = None):
    """int64 ``[E, 3]`` seeds from ``generator`` (or the default generator of ``device``),
    moved to this data-parallel rank's stream (:func:`microscale.distributed.rank_seeds`)."""
    gen_device = generator.device if generator is not None else device
    return rank_seeds(torch.randint(0, 2**31 - 1, (n_experts, N_SEEDS), generator=generator,
                                    device=gen_device, dtype=torch.int64).to(device))
