"""The relu² MLP ``down(relu(up x)²)`` as one autograd node, so that the up projection's gradient
is quantized straight from what the down projection's backward produces.

Why
===
Backward through ``y = W_down · relu(u)²``, ``u = W_up · x`` (per token, bf16 activations)::

    ds = dy · W_down                     the down projection's dgrad (a GEMM writes ds)
    du = where(u > 0, ds · 2 relu(u), 0)  square's then relu's backward (an elementwise pass)
    du -> row view (dgrad) + column view (wgrad) of the up projection (a quantize pass)

As separate autograd nodes, ``du`` is written out in bf16 by one pass and read back by the next.
Here the up projection's quantizer reads ``ds`` and ``u`` and applies the elementwise step as it
loads them (the ``relu_square_grad`` prologue, ``op_specs.PROLOGUES``): ``du`` never exists in
memory. Forward likewise quantizes the down projection's input ``relu(u)²`` from ``u`` (the
``relu_square`` prologue): neither ``relu(u)`` nor its square is written. What backward keeps is
``u`` (what autograd kept before was ``relu(u)``, the same size), the quantized views the GEMMs
need, and, where the down projection's ``recompute_input`` is on (:mod:`.recompute`), not
``relu(u)²``'s column view: backward requantizes it from ``u``.

At the 1b zoo model (8 × 2048 tokens, hidden 8192, bf16) a layer's ``du`` and ``relu(u)`` are
268 MB each: about 0.8 GB of traffic a layer less in a step.

When
====
:func:`relu2_mlp` fuses where the kernels apply the backward step as they load: the up
projection's dy views (dgrad's A, wgrad's A) are 1×128 FP8 blockwise (any token count: the
layer pads to 128), MXFP8 on whole 128×128 tiles (the register pair kernels,
:mod:`~microscale.kernels.quant_rowcol_reg`) or 1×16 NVFP4 with the recipe's RHT and SR (the
reg pass, :mod:`~microscale.kernels.quant_nvfp4_reg`). NVFP4's tensor scale needs the global
amax of ``du`` (and of its Hadamard transform) before any code, so its amax pass applies the
step as it loads too: ``ds`` and ``u`` are read by it and by each of the pair's two launches,
4 bytes an element each time, where the elementwise pass read 4 and wrote 2 and the three
quantizer passes read 2 each; the ALU-bound NVFP4 launches pay ~8 more instructions an
element for it. It still nets a little (H100, session 24, same process: 125m nvfp4 60.56 →
59.40 ms a step, 1b 222.6 → 221.1 ms). With ``CONFIG["DU_IN_DGRAD"]`` (on; session 28, H100:
125m nvfp4 +1.3% tokens/s) the down projection's dgrad GEMM, where it is NVFP4's α GEMM,
writes ``du`` itself instead of ``ds`` (``u`` read once in its epilogue; ``ds`` rounded, then
the op, as here), and the up projection's three passes read ``du`` alone, 2 bytes an element
each. Their amax passes are gone too: that GEMM's epilogue measures du's two NVFP4 amaxes
(``DU_AMAX_IN_DGRAD``), and the up projection's fprop epilogue relu(u)²'s
(``U_AMAX_IN_FPROP``), which the quantizers then take as given (``kernels/gemm_alpha``).
Elsewhere the quantizers would apply the step as a separate eager pass inside the op, slower
than the elementwise kernel ``torch.compile`` fuses, so the layers run as two nodes,
:func:`~microscale.nn.linear_from` on ``"relu_square"`` (same bits).
Also unfused (and said by ``ms.explain()``, ``("mlp", "relu2")``): either projection not an
:class:`~microscale.Linear` or hooked (module hooks must see each call), a bias on the up
projection (its gradient needs ``du``), a projection with a precision switch set, delayed
scaling or stochastic rounding on the down projection's xᵀ view, no backward, no tokens.
Either way the outputs and gradients are bit-identical to ``down(relu(up(x))²)`` run as three
modules (``tests/test_mlp.py``).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
from torch import nn

from ..backend import note_path
from ..recipe import Rounding
from ..tensor import QFormat
from .function import _fprop, linear_grads
from .plan import Plan, alpha_gemm
from .recompute import can_recompute, linear_from, recompute_on, recomputed_xt
from .saved import _stash, _unstash

__all__ = ["relu2_mlp", "Relu2MLPFn", "du_in_dgrad", "du_amax_rht", "relu2_amax_rht"]

# the up projection's dy view formats (and blocks) whose kernels fuse the relu² backward into
# their loads: the FP8 1x128 and MXFP8 register pair kernels (quant_rowcol_reg), NVFP4's reg
# pass and its amax pass (quant_nvfp4_reg; with the RHT and SR the recipe asks for)
FUSED_DY_FORMATS = {QFormat.FP8_BLOCK: (1, 128), QFormat.MXFP8_E4M3: (1, 32),
                    QFormat.MXFP8_E5M2: (1, 32), QFormat.NVFP4: (1, 16)}
# FUSE: False runs every relu² MLP as two nodes (benchmarks' A/B, bench_train "mlp-unfused").
# DU_IN_DGRAD: where the down projection's dgrad runs NVFP4's α GEMM (kernels/gemm_alpha), that
# GEMM writes du = relu_square_grad(ds, u) instead of ds (u read once, in its epilogue), and the
# up projection's dy views are quantized from du alone (2 bytes an element read by each of the
# amax pass and the pair's two launches, instead of ds's and u's 4). Same bits. On since session
# 28 (H100, one process: 125m nvfp4 0.732x -> 0.742x of compiled bf16, nvfp4_no_sr 0.743x ->
# 0.757x); bench_train "no-du-epi" turns it off.
# DU_AMAX_IN_DGRAD (session 53): that GEMM's epilogue also measures du's two NVFP4 amaxes
# (max|du| for the row view, max|RHT(du)| down the columns for the column view;
# kernels/gemm_alpha's AMAX), and the up projection's dy views take them as given: no amax
# pass over du (a 16384x8192 read, ~79 µs at 1b). U_AMAX_IN_FPROP (session 53): likewise
# the up projection's fprop epilogue measures relu(u)²'s amaxes (relu² applied to the stored
# u there, for the amaxes alone), and the down projection's x views (and the xᵀ amax
# backward's recompute takes) are given them: no amax pass over u (~92 µs at 1b). Same bits.
# Measured (H200, 1b nvfp4, one process each): du's alone 197.9 -> 197.3 ms a step (call 4);
# both 190.2 -> 189.9 ms (call 6, "@gemm-amax-off" the passes): the epilogue's amaxes (the
# RHT on the tensor cores, ~7-13 instructions an element) cost most of what the passes took.
CONFIG = {"FUSE": True,
          "DU_IN_DGRAD": os.environ.get("MICROSCALE_DU_IN_DGRAD", "1") != "0",
          "DU_AMAX_IN_DGRAD": os.environ.get("MICROSCALE_DU_AMAX_IN_DGRAD", "1") != "0",
          "U_AMAX_IN_FPROP": os.environ.get("MICROSCALE_U_AMAX_IN_FPROP", "1") != "0"}


class _Layer(NamedTuple):
    """What :func:`~microscale.nn.function.linear_grads` reads of one projection."""
    plan: Plan
    state: dict
    dgrad_q: bool
    wgrad_q: bool
    x_dtype: torch.dtype
    in_features: int
    has_bias: bool


def _hooked(m: nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks)


def _global_hooks() -> bool:
    mm = nn.modules.module
    return bool(mm._global_forward_hooks or mm._global_forward_pre_hooks
                or mm._global_backward_hooks or mm._global_backward_pre_hooks)


def _why_not(up, down, x: torch.Tensor) -> str:
    """Why :func:`relu2_mlp` cannot fuse these layers ("" when it can)."""
    from .linear import Linear
    if not (isinstance(up, Linear) and isinstance(down, Linear)):
        return "not two ms.Linear layers"
    if not CONFIG["FUSE"]:
        return "off (microscale.nn.mlp.CONFIG['FUSE'])"
    if _hooked(up) or _hooked(down) or _global_hooks():
        return "module hooks (each projection must run as its own call)"
    if up.bias is not None:
        return "the up projection has a bias (its gradient needs du in bf16)"
    if x.device.type == "meta" or x.numel() == 0:
        return "no values"
    if not torch.is_grad_enabled() or not (x.requires_grad or any(
            p.requires_grad for m in (up, down) for p in m.parameters())):
        return "no backward"
    if up.precision != "quantized" or down.precision != "quantized":
        return "a precision switch is set"
    up_plan, down_plan = up._plan(), down._plan()
    if not all(p.quantized(g) for p in (up_plan, down_plan) for g in ("fprop", "dgrad", "wgrad")):
        return "a GEMM the recipe keeps in high precision"
    tokens = x.numel() // x.shape[-1]
    for role in ("dgrad.a", "wgrad.a"):
        op = up_plan.operand(role)
        nvfp4 = op.format == QFormat.NVFP4
        if FUSED_DY_FORMATS.get(op.format) != op.block or (not nvfp4 and (
                op.rht or op.rounding == Rounding.STOCHASTIC)):
            return (f"the up projection's {role} is {op.format.value} {op.block} (fused: 1x128 "
                    "FP8 blockwise or MXFP8 without RHT or SR, 1x16 NVFP4)")
        if op.format.is_mx8 and (tokens % 128 or up.out_features % 128):
            # (FP8 blockwise pads tokens to 128 itself; its features are multiples of 128)
            return (f"{tokens} tokens x {up.out_features} hidden is not whole 128x128 tiles of "
                    "the MXFP8 register pair kernel")
    if not can_recompute(down_plan, True, tokens):    # xᵀ from u needs a stateless quantizer
        return "the down projection's xᵀ is delayed or stochastically rounded"
    return ""


def relu2_mlp(x: torch.Tensor, up: nn.Module, down: nn.Module) -> torch.Tensor:
    """``down(relu(up(x))²)``: one autograd node where :mod:`this module <microscale.nn.mlp>`
    can fuse it, else ``linear_from(down, "relu_square", up(x))`` (same bits either way)."""
    why = _why_not(up, down, x)
    if why:
        if why not in ("not two ms.Linear layers", "no values", "no backward") \
                and not torch.compiler.is_compiling():
            note_path("mlp", "relu2", f"unfused: {why}")
        return linear_from(down, "relu_square", up(x))
    up._check_input(x)
    if down.in_features != up.out_features:
        raise ValueError(f"relu2_mlp: {up._label()} gives {up.out_features} features, "
                         f"{down._label()} takes {down.in_features}")
    x, x2d, _ = up._input(x)
    up_args, down_args = up.gemm_args(x.device), down.gemm_args(x.device)
    keep_view = not recompute_on(down.recompute_input, down_args[0], down.out_features)
    if not torch.compiler.is_compiling():
        note_path("mlp", "relu2", "fused: the up projection's dy views quantized from ds and u"
                  + ("" if keep_view else "; relu(u)²'s wgrad view recomputed from u"))
    with torch.autocast(x.device.type, enabled=False):       # exact fp32 GEMM emulation
        y2d = Relu2MLPFn.apply(x2d, up.gemm_weight(), down.gemm_weight(), down.bias, up_args,
                               down_args, keep_view)
    return y2d.reshape(*x.shape[:-1], down.out_features)


class Relu2MLPFn(torch.autograd.Function):
    """``y = W_down · relu(W_up · x)² + b_down`` with every GEMM quantized as each projection's
    plan says; backward keeps ``u``, not ``du`` or ``relu(u)``."""

    @staticmethod
    def forward(ctx, x2d, w_up, w_down, b_down, up_args: tuple, down_args: tuple,
                keep_view: bool):
        (p_up, s_up, seeds_up), (p_dn, s_dn, seeds_dn) = up_args, down_args
        need_dx, need_dwu, need_dwd = ctx.needs_input_grad[:3]
        need_du = need_dx or need_dwu
        recompute = not keep_view and need_dwd      # relu(u)²'s xᵀ requantized in backward
        # relu(u)²'s amaxes in the up projection's fprop epilogue (U_AMAX_IN_FPROP)
        rht = relu2_amax_rht(p_dn, need_dwd)
        u, q_xt, q_wut, _ = _fprop(x2d, w_up, None, p_up, s_up, seeds_up, need_dwu, need_dx,
                                   y_amax=None if rht is None else (rht, "relu_square"))
        u, s_amaxes = u if rht is not None else (u, None)
        y, q_st, q_wdt, st_amax = _fprop(u, w_down, b_down, p_dn, s_dn, seeds_dn,
                                         keep_view and need_dwd, need_du,
                                         recompute=("relu_square", (u,)), xt_amax=recompute,
                                         x_amax=None if s_amaxes is None else
                                         (s_amaxes[0], s_amaxes[1]))
        saved = [u]
        ctx.metas = tuple(_stash(q, saved) for q in (q_xt, q_wut, q_st, q_wdt))
        ctx.extras = (seeds_up is not None, seeds_dn is not None, st_amax is not None)
        saved += [s for s in (seeds_up, seeds_dn, st_amax) if s is not None]
        ctx.save_for_backward(*saved)
        ctx.up = (p_up, s_up, x2d.dtype, x2d.shape[1])
        ctx.down = (p_dn, s_dn, u.dtype, u.shape[1], b_down is not None)
        return y

    @staticmethod
    def backward(ctx, dy2d):
        with torch.autocast(dy2d.device.type, enabled=False):   # exact fp32 GEMM emulation
            return Relu2MLPFn._backward(ctx, dy2d)

    @staticmethod
    def _backward(ctx, dy2d):
        saved = list(ctx.saved_tensors)
        u, rest = saved[0], saved[1:]
        views = []
        for meta in ctx.metas:
            views.append(None if meta is None else _unstash(meta, rest[:3]))
            rest = rest[3:] if meta is not None else rest
        q_xt, q_wut, q_st, q_wdt = views
        seeds_up = rest.pop(0) if ctx.extras[0] else None
        seeds_dn = rest.pop(0) if ctx.extras[1] else None
        st_amax = rest.pop(0) if ctx.extras[2] else None   # forward's amax for relu(u)²'s xᵀ
        need_dx, need_dwu, need_dwd, need_dbd = ctx.needs_input_grad[:4]
        need_du = need_dx or need_dwu
        p_dn, s_dn, u_dtype, hidden, has_bias = ctx.down
        down = _Layer(p_dn, s_dn, need_du, need_dwd, u_dtype, hidden, has_bias)
        if need_dwd and q_st is None:       # relu(u)²'s column view, requantized from u
            q_st = recomputed_xt("relu_square", (u,), hidden, p_dn, s_dn, seeds_dn,
                                 dy2d.shape[1], amax=st_amax)
        # du = relu_square_grad(ds, u): in the dgrad GEMM's epilogue (DU_IN_DGRAD), or as the
        # up projection's quantizers load ds and u
        epi = need_du and du_in_dgrad(p_dn, dy2d, hidden, u_dtype)
        p_up, s_up, x_dtype, in_features = ctx.up
        # and du's amaxes in that GEMM's epilogue (DU_AMAX_IN_DGRAD): no amax pass over du
        rht = du_amax_rht(p_up, need_dx, need_dwu) if epi else None
        rht = None if rht is None else (rht, "")
        ds, dw_down, db_down = linear_grads(down, dy2d, q_st, q_wdt, None, None, seeds_dn,
                                            (need_du, need_dwd, need_dbd),
                                            dx_epilogue=("relu_square_grad", u) if epi else None,
                                            dx_amax=rht)
        ds, du_amaxes = ds if rht is not None else (ds, None)
        del q_st, q_wdt
        dx = dw_up = None
        if need_du:
            up = _Layer(p_up, s_up, need_dx, need_dwu, x_dtype, in_features, False)
            dy_amax = None if du_amaxes is None else (du_amaxes[0], du_amaxes[1])
            dx, dw_up, _ = linear_grads(up, ds, q_xt, q_wut, None, None, seeds_up,
                                        (need_dx, need_dwu, False),
                                        dy_prologue=None if epi else ("relu_square_grad", u),
                                        dy_amax=dy_amax)
        return dx, dw_up, dw_down, db_down, None, None, None


def du_amax_rht(up_plan: Plan, need_dx: bool, need_dwu: bool) -> bool | None:
    """Whether the down projection's dgrad GEMM, writing ``du`` (:func:`du_in_dgrad`), also
    measures du's NVFP4 amaxes for the up projection's dy views (``CONFIG["DU_AMAX_IN_DGRAD"]``):
    True / False (the column view with / without its d = 16 RHT), or None where it does not
    (off; a view that is not NVFP4, or rotated otherwise)."""
    if not CONFIG["DU_AMAX_IN_DGRAD"]:
        return None
    ops = [up_plan.operand(r) for r, need in (("dgrad.a", need_dx), ("wgrad.a", need_dwu))
           if need]
    if not ops or any(op.format != QFormat.NVFP4 or op.block != (1, 16) for op in ops):
        return None
    if need_dx and ops[0].rht:                 # a rotated row view's amax is not max|du|
        return None
    col_rht = ops[-1].rht if need_dwu else 0
    return None if col_rht not in (0, 16) else col_rht == 16


def relu2_amax_rht(down_plan: Plan, need_dwd: bool) -> bool | None:
    """Whether the up projection's fprop GEMM (NVFP4's α kernel, where it runs) measures
    ``relu(u)²``'s NVFP4 amaxes for the down projection's x views
    (``CONFIG["U_AMAX_IN_FPROP"]``): True / False (the xᵀ view's amax with / without its
    d = 16 RHT), or None (off; fprop's x not NVFP4 1x16 unrotated, or xᵀ not NVFP4 1x16
    rotated by 16 or not at all)."""
    if not (CONFIG["U_AMAX_IN_FPROP"] and down_plan.quantized("fprop")):
        return None
    xa = down_plan.operand("fprop.a")
    if xa.format != QFormat.NVFP4 or xa.block != (1, 16) or xa.rht:
        return None
    if not (need_dwd and down_plan.quantized("wgrad")):
        return False
    xt = down_plan.operand("wgrad.b")
    if xt.format != QFormat.NVFP4 or xt.block != (1, 16) or xt.rht not in (0, 16):
        return None
    return xt.rht == 16


def du_in_dgrad(plan: Plan, dy2d: torch.Tensor, hidden: int, out_dtype: torch.dtype) -> bool:
    """Whether the down projection's dgrad GEMM (``dy [tokens, d] · W_downᵀ``) writes ``du``
    itself (``CONFIG["DU_IN_DGRAD"]``): where it runs NVFP4's α GEMM, whose epilogue applies
    the op (``gemm_paths.factor_in_epilogue``; elsewhere the op would run as a pass of its
    own, slower than the quantizers' prologue)."""
    if not (CONFIG["DU_IN_DGRAD"] and plan.quantized("dgrad")):
        return False
    fmt_a, fmt_b = (plan.operand(f"dgrad.{o}").format.value for o in "ab")
    multiple = plan.recipe.required_multiples()["tokens"]
    tokens = -(-dy2d.shape[0] // multiple) * multiple          # dy's rows as linear_grads pads
    return alpha_gemm(fmt_a, fmt_b, tokens, hidden, dy2d.shape[1], out_dtype, dy2d.device,
                      plan.recipe.backend)
