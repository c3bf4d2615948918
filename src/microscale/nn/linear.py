"""``ms.Linear``: a drop-in ``nn.Linear`` whose three GEMMs run in a block-scaled format.

The three GEMMs
===============
A linear layer ``y = x Wᵀ + b`` with x ``[tokens, in]`` (leading dims flattened), W ``[out, in]``
and the incoming gradient dy ``[tokens, out]`` runs one GEMM forward and two backward. Every GEMM
is ``A Bᵀ`` with both operands quantized along the reduction dimension K, which is what the
block scales run along and what the tensor cores reduce over::

    fprop   y  = x  Wᵀ     A = x    [tokens, in]    B = W   [out, in]     K = in
    dgrad   dx = dy W      A = dy   [tokens, out]   B = Wᵀ  [in, out]     K = out
    wgrad   dW = dyᵀ x     A = dyᵀ  [out, tokens]   B = xᵀ  [in, tokens]  K = tokens

Each operand therefore exists in two *layouts*: x is quantized row-wise (along ``in``) for fprop
and column-wise (along ``tokens``, i.e. xᵀ) for wgrad; dy row-wise for dgrad and column-wise
for wgrad. ``ms.quantize_rowcol`` produces both views of x (and of dy) in one call, which is
the point where a fused kernel reads the tensor once. The weight needs a row-wise view for
fprop and a view along ``out`` for dgrad: with square 2D tiles (NVFP4 16×16, FP8 128×128) the
second is exactly ``q_w.t()`` (SPEC §3), so fprop's quantized weight is reused; with 1D blocks
Wᵀ is quantized afresh from the fp32 master.

Formats and the NVFP4 recipe (SPEC §9)
======================================
Which format, block, rounding and RHT each operand gets is the :class:`~microscale.Recipe`'s
business; this layer only follows it. For the default ``"nvfp4"``: x 1×16 and W 16×16 with
round-to-nearest in fprop; dy 1×16 with stochastic rounding in dgrad (W reused as ``q_w.t()``);
dyᵀ and xᵀ 1×16 after a 16-point random Hadamard transform in wgrad, dy stochastically rounded.
Element values times block scales are exact in bf16, so ``ms.scaled_mm`` is exact up to
summation order. A GEMM whose config is not quantized runs as a plain matmul in
``recipe.compute_dtype`` (bf16 by default).

What is kept for backward
=========================
Not x: the *quantized* xᵀ (packed codes + block scales + amax), i.e. 4.5 bits per element for
NVFP4 instead of 16 for bf16, plus the quantized weight when dgrad reuses it (a per-layer
constant, not per token). :func:`saved_activation_bytes` gives the per-token cost of a recipe.
When wgrad runs in high precision, x is kept in ``compute_dtype``.

Precision switches
==================
``layer.high_precision = True`` runs all three GEMMs in ``compute_dtype`` with no quantization
(evaluation; the paper's "switch everything to bf16"). ``layer.hp_fprop = True`` runs only fprop
in ``compute_dtype`` and keeps dgrad/wgrad quantized (the paper's Appendix D switch near the
end of training: the forward pass sees unquantized weights, gradients stay cheap). Both are
plain attributes; :class:`~microscale.PrecisionSchedule` and :func:`~microscale.high_precision`
set them for a whole model.

Dtypes and tokens
=================
Master ``weight``/``bias`` are fp32 parameters. The output and dx have x's dtype (fp32, bf16 or
fp16; under ``torch.autocast`` x is first cast to the autocast dtype, as ``nn.Linear`` would be,
and autocast is off inside the layer so the GEMM emulation stays exact); dW and db are fp32. Activations are quantized from x in its own dtype, the weight from
the fp32 master. Token counts that the wgrad blocks cannot tile are zero-padded up to
``recipe.required_multiples()["tokens"]``; zero rows add nothing to ``dyᵀ x`` and their fprop /
dgrad rows are sliced off, so padding never changes a result. Stochastic rounding draws from
torch's global RNG (``torch.manual_seed`` reproduces it) unless the layer owns a
``generator``. Delayed FP8 scaling keeps one amax history per GEMM operand role
(``"fprop.a"``, ``"wgrad.b"``, ...), saved in the ``state_dict`` with the recipe.

``torch.compile``: the quantized function runs eagerly (``torch.compiler.disable``). The
quantizer path makes data-dependent decisions (shape guards on values, the optional NaN/Inf
check), which dynamo cannot trace into one graph, and bit-exactness matters more here than fusing reference
ops. The rest of the model still compiles around it (a graph break per layer); the fast path
is the Triton kernels behind ``ms.quantize_rowcol``/``ms.scaled_mm``, not Inductor.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from ..gemm import scaled_mm
from ..quant.common import SUPPORTED_DTYPES
from ..quant.fp8 import DelayedScaling
from ..quantize import quantize, quantize_rowcol
from ..recipe import Recipe, Rounding
from ..tensor import QuantizedTensor

__all__ = ["Linear", "saved_activation_bytes"]

log = logging.getLogger(__name__)

_ROLES = ("fprop.a", "fprop.b", "dgrad.a", "dgrad.b", "wgrad.a", "wgrad.b")


# ============================================================================ the quantized GEMMs
@dataclass
class _Plan:
    """What one call runs: the recipe, which GEMMs are switched to high precision, and the
    layer's mutable quantization state (delayed-scaling histories, SR generator)."""

    recipe: Recipe
    fprop_hp: bool
    grads_hp: bool
    delayed: dict
    generator: torch.Generator | None

    def quantized(self, gemm: str) -> bool:
        hp = self.fprop_hp if gemm == "fprop" else self.grads_hp
        return getattr(self.recipe, gemm).quantized and not hp

    def spec(self, role: str | None, device: torch.device) -> tuple | None:
        """``(format, quantize options)`` for a GEMM operand role such as ``"wgrad.b"``."""
        if role is None:
            return None
        gemm, operand = role.split(".")
        op = getattr(getattr(self.recipe, gemm), operand)
        # hot path: no NaN/Inf scan (a full read plus a host sync per operand); a non-finite
        # activation or gradient surfaces as a non-finite loss, which the harness stops on
        options = op.quantize_kwargs() | {"check_finite": False}
        if op.rounding == Rounding.STOCHASTIC and self.generator is not None:
            options["generator"] = self.generator
        if role in self.delayed:                      # scale from the amax history
            options["scale"] = self.delayed[role].scale.to(device)
        return op.format, options

    def record(self, role: str | None, q: QuantizedTensor | None) -> None:
        if role in self.delayed and q is not None:    # this step's amax feeds the next scale
            self.delayed[role].update(q.amax)


def _quantize(t: torch.Tensor, plan: _Plan, role: str) -> QuantizedTensor:
    fmt, options = plan.spec(role, t.device)
    q = quantize(t, fmt, backend=plan.recipe.backend, **options)
    plan.record(role, q)
    return q


def _quantize_views(t2d: torch.Tensor, plan: _Plan, row_role: str | None, col_role: str | None):
    """Row-wise (along the feature dim) and column-wise (along tokens) views in one call."""
    if row_role is None and col_role is None:
        return None, None
    row, col = plan.spec(row_role, t2d.device), plan.spec(col_role, t2d.device)
    q_row, q_col = quantize_rowcol(t2d, row, col, backend=plan.recipe.backend)
    plan.record(row_role, q_row)
    plan.record(col_role, q_col)
    return q_row, q_col


def _pad_tokens(t2d: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero rows up to a multiple of the wgrad block: they add nothing to ``dyᵀ x``."""
    pad = -t2d.shape[0] % multiple
    return F.pad(t2d, (0, 0, 0, pad)) if pad else t2d


def _hp_mm(a: torch.Tensor, b: torch.Tensor, compute_dtype: torch.dtype, out_dtype) -> torch.Tensor:
    return (a.to(compute_dtype) @ b.to(compute_dtype)).to(out_dtype)


def _stash(q: QuantizedTensor) -> tuple[list[torch.Tensor], QuantizedTensor]:
    """Split a QuantizedTensor into tensors for ``save_for_backward`` and a tensor-free shell."""
    empty = torch.empty(0)
    return [q.data, q.scale, q.amax], replace(q, data=empty, scale=empty, amax=empty)


def _unstash(tensors, shell: QuantizedTensor) -> QuantizedTensor:
    data, scale, amax = tensors
    return replace(shell, data=data, scale=scale, amax=amax)


def _fprop(x2d, weight, bias, plan: _Plan, want_xt: bool):
    """y = x Wᵀ + b; also returns the quantized xᵀ (for wgrad) and W (for dgrad reuse)."""
    recipe, tokens = plan.recipe, x2d.shape[0]
    fprop_q = plan.quantized("fprop") and tokens > 0
    want_xt = want_xt and tokens > 0
    x_pad = _pad_tokens(x2d, recipe.required_multiples()["tokens"]) if fprop_q or want_xt else x2d
    # one pass over x: row-wise view for fprop (K = in), column-wise xᵀ for wgrad (K = tokens)
    q_x, q_xt = _quantize_views(x_pad, plan, "fprop.a" if fprop_q else None,
                                "wgrad.b" if want_xt else None)
    q_w = None
    if fprop_q:
        q_w = _quantize(weight, plan, "fprop.b")
        y = scaled_mm(q_x, q_w, out_dtype=x2d.dtype, backend=recipe.backend)[:tokens]
    else:
        y = _hp_mm(x2d, weight.t(), recipe.compute_dtype, x2d.dtype)
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y, q_xt, q_w


class _QuantizedLinearFn(torch.autograd.Function):
    """The three GEMMs of a linear layer, each as the plan's recipe says."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, plan: _Plan):
        recipe = plan.recipe
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        wgrad_q = need_dw and plan.quantized("wgrad") and x2d.shape[0] > 0
        # fprop: x [tokens, in] · W [out, in], both along `in`
        y, q_xt, q_w = _fprop(x2d, weight, bias, plan, want_xt=wgrad_q)
        # dgrad may reuse fprop's weight as q_w.t() when W is in square 2D tiles (SPEC §3)
        reuse_w = (q_w is not None and need_dx and plan.quantized("dgrad")
                   and recipe.dgrad.b == recipe.fprop.b and recipe.fprop.b.square_tiles)
        saved, ctx.xt_shell, ctx.w_shell = [weight], None, None
        if wgrad_q:          # keep the packed xᵀ, not x: 4.5 bits/element for NVFP4
            tensors, ctx.xt_shell = _stash(q_xt)
            saved += tensors
        elif need_dw:
            saved.append(x2d.to(recipe.compute_dtype))
        if reuse_w:
            tensors, ctx.w_shell = _stash(q_w)
            saved += tensors
        ctx.save_for_backward(*saved)
        ctx.plan, ctx.x_dtype, ctx.has_bias = plan, x2d.dtype, bias is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy2d):
        with torch.autocast(dy2d.device.type, enabled=False):   # exact fp32 GEMM emulation
            return _QuantizedLinearFn._backward(ctx, dy2d)

    @staticmethod
    def _backward(ctx, dy2d):
        plan, recipe = ctx.plan, ctx.plan.recipe
        weight, *rest = ctx.saved_tensors
        need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
        tokens = dy2d.shape[0]
        dgrad_q = need_dx and plan.quantized("dgrad") and tokens > 0
        wgrad_q = ctx.xt_shell is not None
        dy_pad = _pad_tokens(dy2d, recipe.required_multiples()["tokens"]) \
            if dgrad_q or wgrad_q else dy2d
        # one pass over dy: row-wise for dgrad (K = out), column-wise dyᵀ for wgrad (K = tokens)
        q_dy, q_dyt = _quantize_views(dy_pad, plan, "dgrad.a" if dgrad_q else None,
                                      "wgrad.a" if wgrad_q else None)
        dx = dw = db = None
        if need_dx:          # dgrad: dy [tokens, out] · Wᵀ [in, out], both along `out`
            if dgrad_q:
                q_wt = _unstash(rest[-3:], ctx.w_shell).t() if ctx.w_shell is not None \
                    else _quantize(weight.t().contiguous(), plan, "dgrad.b")
                dx = scaled_mm(q_dy, q_wt, out_dtype=ctx.x_dtype, backend=recipe.backend)[:tokens]
            else:
                dx = _hp_mm(dy2d, weight, recipe.compute_dtype, ctx.x_dtype)
        if need_dw:          # wgrad: dyᵀ [out, tokens] · xᵀ [in, tokens], both along `tokens`
            if wgrad_q:
                q_xt = _unstash(rest[:3], ctx.xt_shell)
                dw = scaled_mm(q_dyt, q_xt, out_dtype=torch.float32, backend=recipe.backend)
            else:
                dw = _hp_mm(dy2d.t(), rest[0], recipe.compute_dtype, torch.float32)
            dw = dw.to(weight.dtype)
        if need_db and ctx.has_bias:
            db = dy2d.float().sum(0)
        return dx, dw, db, None


@torch.compiler.disable
def _linear(x2d, weight, bias, plan: _Plan, needs_grad: bool) -> torch.Tensor:
    """Eager entry point (opaque to dynamo, see the module docstring)."""
    with torch.autocast(x2d.device.type, enabled=False):   # exact fp32 GEMM emulation
        if needs_grad:
            return _QuantizedLinearFn.apply(x2d, weight, bias, plan)
        return _fprop(x2d, weight, bias, plan, want_xt=False)[0]


# ============================================================================ the module
def saved_activation_bytes(recipe: str | Recipe, in_features: int, tokens: int) -> int:
    """Bytes a layer keeps from x for backward at ``tokens`` tokens (weights not counted).

    Quantized wgrad: the packed xᵀ ``[in, tokens_padded]`` (codes, block scales, fp32 amax, and
    for tensorwise FP8 the fp32 ``scale_inv``). High-precision wgrad: x in ``compute_dtype``.
    """
    recipe = Recipe.parse(recipe)
    op = recipe.wgrad.b
    if not recipe.wgrad.quantized:
        return in_features * tokens * torch.empty((), dtype=recipe.compute_dtype).element_size()
    mult = recipe.required_multiples()["tokens"]
    t_pad = math.ceil(tokens / mult) * mult
    n = in_features * t_pad
    fmt = op.format.value
    if fmt in ("nvfp4", "mxfp4"):
        codes, scales = n // 2, n // op.block_size          # E4M3 or UE8M0: 1 byte each
    elif fmt.startswith("mxfp8"):
        codes, scales = n, n // op.block_size
    elif fmt == "fp8_block":
        codes, scales = n, 4 * (n // (op.block[0] * op.block[1]))
    else:  # fp8_tensor: one fp32 scale_inv
        codes, scales = n, 4
    return codes + scales + 4                                     # + fp32 amax


class Linear(nn.Module):
    """``nn.Linear`` with quantized GEMMs; see the module docstring for the math.

    Args:
        in_features, out_features, bias: as ``nn.Linear``.
        recipe: a preset name (``"nvfp4"``, ``"mxfp8"``, ...) or a :class:`Recipe`.
        device: where the fp32 master parameters live.
        generator: optional ``torch.Generator`` for stochastic rounding (default: global RNG).
        name: the module path, used in error messages (``convert`` sets it).

    Attributes ``high_precision`` and ``hp_fprop`` are the precision switches.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: str | Recipe = "nvfp4", device=None, *,
                 generator: torch.Generator | None = None, name: str | None = None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.name = name
        self.generator = generator
        self.high_precision = False
        self.hp_fprop = False
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device,
                                               dtype=torch.float32))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=torch.float32)) \
            if bias else None
        self.recipe = recipe
        self.reset_parameters()

    # ------------------------------------------------------------------ recipe and state
    @property
    def recipe(self) -> Recipe:
        return self._recipe

    @recipe.setter
    def recipe(self, recipe: str | Recipe) -> None:
        recipe = Recipe.parse(recipe)
        _check_dims(recipe, self.in_features, self.out_features, self.name)
        self._recipe = recipe
        self._delayed = {role: _delayed_for(recipe, role) for role in _ROLES}
        self._delayed = {k: v for k, v in self._delayed.items() if v is not None}

    @property
    def precision(self) -> str:
        """``"high_precision"``, ``"hp_fprop"`` or ``"quantized"`` (what the next call runs)."""
        if self.high_precision or not self._recipe.quantized:
            return "high_precision"
        return "hp_fprop" if self.hp_fprop else "quantized"

    def reset_parameters(self) -> None:
        # the same initialisation as nn.Linear, so a converted model trains the same way
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: str | Recipe = "nvfp4", **kwargs) -> "Linear":
        """A ``ms.Linear`` with a copy of ``linear``'s parameters (as fp32 masters)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear expects an nn.Linear, got {type(linear).__name__}")
        new = cls(linear.in_features, linear.out_features, linear.bias is not None, recipe,
                  device=linear.weight.device, **kwargs)
        with torch.no_grad():
            new.weight.copy_(linear.weight.float())
            if linear.bias is not None:
                new.bias.copy_(linear.bias.float())
        new.train(linear.training)
        return new

    def get_extra_state(self) -> dict:
        return {"recipe": self._recipe.to_json(), "high_precision": self.high_precision,
                "hp_fprop": self.hp_fprop,
                "delayed": {role: ds.state_dict() for role, ds in self._delayed.items()}}

    def set_extra_state(self, state: dict) -> None:
        recipe = Recipe.from_json(state["recipe"])
        if recipe != self._recipe:
            log.info("%s: loading recipe %r from the state_dict (was %r)",
                     self.name or "Linear", recipe.name, self._recipe.name)
            self.recipe = recipe
        self.high_precision = bool(state.get("high_precision", False))
        self.hp_fprop = bool(state.get("hp_fprop", False))
        for role, ds_state in state.get("delayed", {}).items():
            if role in self._delayed:
                self._delayed[role].load_state_dict(
                    {k: v.to(self.weight.device) if torch.is_tensor(v) else v
                     for k, v in ds_state.items()})

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{self._label()}: expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{self._label()}: input dtype must be float32, bfloat16 or "
                            f"float16, got {x.dtype}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"{self._label()}: expected input [..., {self.in_features}], "
                             f"got {tuple(x.shape)}")
        if torch.is_autocast_enabled(x.device.type):     # behave like nn.Linear under autocast
            x = x.to(torch.get_autocast_dtype(x.device.type))
        x2d = x.reshape(-1, self.in_features)
        plan = _Plan(self._recipe, fprop_hp=self.precision != "quantized",
                     grads_hp=self.precision == "high_precision", delayed=self._delayed,
                     generator=self.generator)
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in self.parameters()))
        y2d = _linear(x2d, self.weight, self.bias, plan, needs_grad)
        return y2d.reshape(*x.shape[:-1], self.out_features)

    def _label(self) -> str:
        return f"ms.Linear {self.name!r}" if self.name else \
            f"ms.Linear({self.in_features}, {self.out_features})"

    def extra_repr(self) -> str:
        extra = "" if self.precision == "quantized" else f", precision={self.precision}"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, recipe={self._recipe.name}{extra}")


def _delayed_for(recipe: Recipe, role: str) -> DelayedScaling | None:
    gemm, operand = role.split(".")
    cfg = getattr(recipe, gemm)
    op = getattr(cfg, operand)
    if not (cfg.quantized and op.delayed):
        return None
    dtype = torch.float8_e4m3fn if op.fp8_dtype == "e4m3" else torch.float8_e5m2
    return DelayedScaling(dtype, history_len=op.history_len, margin=op.margin)


def _check_dims(recipe: Recipe, in_features: int, out_features: int, name: str | None) -> None:
    need = recipe.required_multiples()
    for dim, size in (("in", in_features), ("out", out_features)):
        if size % need[dim]:
            who = f"layer {name!r}" if name else f"ms.Linear({in_features}, {out_features})"
            raise ValueError(
                f"{who}: {dim}_features={size} is not a multiple of {need[dim]}, the block the "
                f"{recipe.name!r} recipe quantizes `{dim}` with; keep this layer in high "
                f"precision (convert(..., keep_high_precision=[{(name or '<name>')!r}]) or "
                f"on_error='skip') or pad the feature size to a multiple of {need[dim]}")
