"""``ms.analyze``: where does a recipe lose precision, layer by layer and operand by operand?

One high-precision forward + backward of ``model`` on ``batch`` captures, for every linear layer
``y = x Wᵀ``, its input ``x`` ``[tokens, in]`` (forward hook) and the gradient of the loss with
respect to its output ``dy`` ``[tokens, out]`` (``torch.autograd.grad`` on the captured outputs,
so no ``.grad`` of the model is ever touched). Each of the layer's three GEMMs is then replayed
offline with the recipe's quantizers, exactly as ``ms.Linear`` would feed them::

    GEMM    A (quantized along K)     B (quantized along K)     K        output
    fprop   x     [tokens, in]        W   [out, in]             in       y  = x Wᵀ
    dgrad   dy    [tokens, out]       Wᵀ  [in, out]             out      dx = dy W
    wgrad   dyᵀ   [out, tokens]       xᵀ  [in, tokens]          tokens   dW = dyᵀ x

Operand keys are ``fprop.x fprop.w dgrad.dy dgrad.w wgrad.dy wgrad.x``, output keys
``fprop.y dgrad.dx wgrad.dw``. Per operand (``op`` the fp32 operand as the quantizer sees it
and ``q`` its dequantized value in the same domain):

* ``rel_err = ||q - op|| / ||op||`` and ``sqnr_db = 20·log10(||op|| / ||op - q||)`` (inf when exact);
* ``flush_frac``: fraction of the nonzero elements of ``op`` that quantize to 0;
* ``sat_frac``: fraction of elements clipped by the element format, ``|op_i| > elem_max · s_i``
  where ``s_i`` is the element's decoded scale (block scale × tensor scale) and elem_max is
  6 (E2M1), 448 (E4M3) or 57344 (E5M2). With NVFP4 this happens when a block max rounds
  its E4M3 scale *down*; with MX "floor" scales and FP8 delayed scaling it is the usual clip;
* ``amax``: ``max|op|``;
* ``scale_min / scale_median / scale_max``: decoded scales (block scale × tensor scale, one
  per block or tile) over the blocks that hold a nonzero value, and ``scale_zero_frac``: the
  fraction of those blocks whose scale decodes to 0 (underflow: the whole block is flushed).

RHT operands (wgrad's dyᵀ and xᵀ in the NVFP4 recipe) are measured in the **rotated domain**:
``op = rht(operand)`` and ``q = dequantize(undo_rht=False)``. The RHT is orthogonal, so
rel_err and SQNR equal those of the un-rotated comparison; flushes, saturation, amax and scales
only exist in the domain the quantizer saw. Per output, ``rel_err`` and ``sqnr_db`` compare
``ms.scaled_mm`` on the quantized operands with the fp32 product of the captured operands (the
error of quantization alone, without the bf16 cast). A GEMM that the recipe keeps in high
precision has ``None`` metrics.

Which recipe: a plain ``nn.Linear`` is analyzed as if converted with ``recipe``; an
``ms.Linear`` with its own ``.recipe`` (what training really runs) and it runs in high
precision during the capture. With ``recipe=None`` plain ``nn.Linear`` layers are skipped.
Layers whose dims the recipe cannot block (``Recipe.required_multiples``) are skipped with a
reason; the token dim is zero-padded to the block size instead (zero rows change no product).
Stochastic rounding draws from a private generator (``seed``), and the global RNG state is
restored afterwards, so ``analyze`` never perturbs a training run's randomness.
"""

from __future__ import annotations

import inspect
import logging
import sys
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..gemm import scaled_mm
from ..hadamard import rht
from ..quantize import quantize
from ..recipe import GemmConfig, OperandConfig, Recipe
from .metrics import operand_metrics, output_metrics
from .report import AnalysisReport

__all__ = ["analyze", "find_linears", "compute_loss", "OPERANDS", "OUTPUTS"]

log = logging.getLogger(__name__)

# (gemm, operand role in the recipe, key) in display order
OPERANDS = (("fprop", "a", "fprop.x"), ("fprop", "b", "fprop.w"), ("dgrad", "a", "dgrad.dy"),
            ("dgrad", "b", "dgrad.w"), ("wgrad", "a", "wgrad.dy"), ("wgrad", "b", "wgrad.x"))
OUTPUTS = {"fprop": "fprop.y", "dgrad": "dgrad.dx", "wgrad": "wgrad.dw"}


def _ms_linear_class():
    # an ms.Linear can only exist once its module is imported; don't pay that import otherwise
    module = sys.modules.get("microscale.nn.linear")
    return None if module is None else module.Linear


def find_linears(model: nn.Module) -> list[tuple[str, nn.Module, bool]]:
    """``(name, module, is_converted)`` for every ``nn.Linear`` or ``ms.Linear`` in ``model``."""
    ms_linear = _ms_linear_class()
    found = []
    for name, mod in model.named_modules():
        if ms_linear is not None and isinstance(mod, ms_linear):
            found.append((name, mod, True))
        elif isinstance(mod, nn.Linear):
            found.append((name, mod, False))
    return found


def _layer_recipe(mod: nn.Module, converted: bool, recipe: Recipe | None) -> Recipe | None:
    if converted:
        return mod.recipe
    return recipe


def _dims_reason(mod: nn.Module, recipe: Recipe) -> str | None:
    need = recipe.required_multiples()
    for dim, size in (("in", mod.in_features), ("out", mod.out_features)):
        if size % need[dim]:
            return f"{dim}_features={size} is not a multiple of {need[dim]} ({recipe.name})"
    return None


class _Capture:
    """Forward hooks recording each layer's input and output; ms.Linear runs in high precision."""

    def __init__(self, layers: list[tuple[str, nn.Module, bool]]):
        self.inputs = {name: [] for name, _, _ in layers}
        self.outputs = {name: [] for name, _, _ in layers}
        self.order: list[str] = []
        # ms.Linear's own switch: no quantization and no delayed-scaling update in its forward
        self._hp_flags = [(mod, mod.high_precision) for _, mod, conv in layers if conv]
        for mod, _ in self._hp_flags:
            mod.high_precision = True
        self._handles = [mod.register_forward_hook(self._hook(name, conv))
                         for name, mod, conv in layers]

    def _hook(self, name: str, converted: bool):
        def hook(mod, args, out):
            x = args[0]
            if converted:     # fp32 output, like a plain nn.Linear (the layer computed bf16)
                w = mod.gemm_weight()               # [out, in] whatever the master's layout
                out = F.linear(x.to(w.dtype), w, mod.bias).to(out.dtype)
            if name not in self.order:
                self.order.append(name)
            self.inputs[name].append(x.detach().reshape(-1, x.shape[-1]))
            self.outputs[name].append(out)
            return out if converted else None
        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        for mod, flag in self._hp_flags:
            mod.high_precision = flag


def _call_model(model: nn.Module, batch):
    return model(*batch) if isinstance(batch, (tuple, list)) else model(batch)


def _default_loss(output) -> torch.Tensor:
    if isinstance(output, (tuple, list)):
        output = next((o for o in output if torch.is_tensor(o) and o.is_floating_point()), None)
    if not torch.is_tensor(output):
        raise TypeError("analyze: the model output is not a tensor (or a tuple holding one); "
                        "pass loss_fn")
    return output.float().pow(2).mean()


def compute_loss(loss_fn: Callable | None, output, batch) -> torch.Tensor:
    if loss_fn is None:
        return _default_loss(output)
    try:
        n_params = len(inspect.signature(loss_fn).parameters)
    except (TypeError, ValueError):
        n_params = 1
    loss = loss_fn(output, batch) if n_params >= 2 else loss_fn(output)
    if not torch.is_tensor(loss) or loss.numel() != 1:
        raise TypeError("analyze: loss_fn must return a scalar tensor")
    return loss


def _capture(model, batch, loss_fn, layers):
    """One hp forward + backward; returns ({name: x}, {name: dy}, order, loss value)."""
    cap = _Capture(layers)
    try:
        with torch.enable_grad():
            loss = compute_loss(loss_fn, _call_model(model, batch), batch)
            outs = [(n, o) for n in cap.order for o in cap.outputs[n]]
            if not outs:
                raise ValueError("analyze: no linear layer ran in the forward pass")
            if not loss.requires_grad or not all(o.requires_grad for _, o in outs):
                raise ValueError("analyze: the loss does not depend on the layer outputs through "
                                 "autograd (are all parameters frozen?)")
            grads = torch.autograd.grad(loss, [o for _, o in outs], allow_unused=True)
    finally:
        cap.remove()
    dys: dict[str, list] = {n: [] for n in cap.order}
    for (n, o), g in zip(outs, grads):
        dys[n].append((torch.zeros_like(o) if g is None else g).detach().reshape(-1, o.shape[-1]))
    xs = {n: torch.cat(cap.inputs[n]).float() for n in cap.order}
    return xs, {n: torch.cat(dys[n]).float() for n in cap.order}, cap.order, float(loss.detach())


def _pad_tokens(t: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero-pad the last dim of ``t`` to a multiple (zero tokens leave dW unchanged)."""
    pad = (-t.shape[-1]) % multiple
    return F.pad(t, (0, pad)) if pad else t


def _quantize_op(op_hp: torch.Tensor, cfg: OperandConfig, gen: torch.Generator):
    kw = cfg.quantize_kwargs()
    if kw.get("stochastic"):
        kw["generator"] = gen
    q = quantize(op_hp, cfg.format, backend="reference", **kw)
    ref = rht(op_hp, q.rht_d) if q.rht_d else op_hp
    return q, ref


def _analyze_layer(x: torch.Tensor, dy: torch.Tensor, w: torch.Tensor, recipe: Recipe,
                   gen: torch.Generator) -> dict:
    """Metrics of one layer's six operands and three GEMM outputs (see the module docstring)."""
    tok_mult = recipe.required_multiples()["tokens"]
    tensors = {
        "fprop": (x, w),
        "dgrad": (dy, w.t().contiguous()),
        "wgrad": (_pad_tokens(dy.t().contiguous(), tok_mult), _pad_tokens(x.t().contiguous(), tok_mult)),
    }
    per_op, per_out = {}, {}
    for gemm, (a_hp, b_hp) in tensors.items():
        cfg: GemmConfig = getattr(recipe, gemm)
        if not cfg.quantized:
            continue
        qa, ref_a = _quantize_op(a_hp, cfg.a, gen)
        qb, ref_b = _quantize_op(b_hp, cfg.b, gen)
        key_a, key_b = (k for g, _, k in OPERANDS if g == gemm)
        per_op[key_a] = operand_metrics(ref_a, qa)
        per_op[key_b] = operand_metrics(ref_b, qb)
        out_q = scaled_mm(qa, qb, out_dtype=torch.float32)
        per_out[OUTPUTS[gemm]] = output_metrics(a_hp @ b_hp.t(), out_q)
    return _flatten(per_op, per_out)


def _flatten(per_op: dict, per_out: dict) -> dict:
    """{key: {metric: v}} → {metric: {key: v}} with every key present (None when hp)."""
    layer: dict = {}
    op_keys = [k for _, _, k in OPERANDS]
    for metric in ("sqnr_db", "rel_err"):
        layer[metric] = {k: (per_op.get(k) or per_out.get(k) or {}).get(metric)
                         for k in (*op_keys, *OUTPUTS.values())}
    for metric in ("flush_frac", "sat_frac", "amax", "scale_min", "scale_median", "scale_max",
                   "scale_zero_frac"):
        layer[metric] = {k: (per_op.get(k) or {}).get(metric) for k in op_keys}
    return layer


def analyze(model: nn.Module, batch, recipe: Recipe | str | None = None,
            loss_fn: Callable | None = None, *, include: Callable[[str, nn.Module], bool] | None = None,
            seed: int = 0) -> AnalysisReport:
    """Per-layer, per-operand quantization diagnostics of ``recipe`` on one batch.

    Args:
        model: any module holding ``nn.Linear`` and/or ``ms.Linear`` layers; not modified.
        batch: a tensor (``model(batch)``) or a tuple (``model(*batch)``).
        recipe: a :class:`Recipe` or preset name, used for plain ``nn.Linear`` layers.
        loss_fn: ``loss_fn(output, batch)`` if it takes two arguments, else ``loss_fn(output)``;
            default: ``mean(output²)`` (the first floating tensor of a tuple output).
        include: ``include(name, module) -> bool`` selects the layers; default: every linear
            that ``ms.convert`` would consider (output heads are left out).
        seed: seed of the private generator used for stochastic rounding.
    """
    if isinstance(recipe, str):
        recipe = Recipe.from_name(recipe)
    if recipe is not None and not isinstance(recipe, Recipe):
        raise TypeError(f"analyze: recipe must be a Recipe, a preset name or None, "
                        f"got {type(recipe).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"analyze: model must be an nn.Module, got {type(model).__name__}")
    layers, skipped = _select(model, recipe, include)
    for name, why in skipped:
        log.info("analyze: skipping %s: %s", name, why)
    if not layers:
        raise ValueError("analyze: no linear layer to analyze" + (
            "; pass a recipe to analyze plain nn.Linear layers" if recipe is None else "")
            + "".join(f"\n  skipped {n}: {why}" for n, why in skipped))
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices):
        xs, dys, order, loss = _capture(model, batch, loss_fn, layers)
    by_name = {name: (mod, conv) for name, mod, conv in layers}
    gen = torch.Generator(device=xs[order[0]].device).manual_seed(seed)
    rows = []
    for index, name in enumerate(order):
        mod, converted = by_name[name]
        layer_recipe = _layer_recipe(mod, converted, recipe)
        with torch.no_grad():
            w = mod.gemm_weight() if converted else mod.weight
            metrics = _analyze_layer(xs[name], dys[name], w.detach().float(), layer_recipe, gen)
        rows.append({"name": name, "index": index, "converted": converted,
                     "recipe": layer_recipe.name, "in_features": mod.in_features,
                     "out_features": mod.out_features, "tokens": xs[name].shape[0], **metrics})
    return AnalysisReport(rows, recipe=recipe.name if recipe is not None else None,
                          skipped=skipped, meta={"loss": loss, "seed": seed})


def _heads(model: nn.Module) -> dict:
    """Output heads that ``ms.convert`` never converts (so analysis leaves them out too)."""
    try:
        from ..nn.convert import _find_heads
    except ImportError:
        return {}
    return _find_heads(model)


def _select(model, recipe, include):
    layers, skipped = [], []
    heads = _heads(model) if include is None else {}
    for name, mod, converted in find_linears(model):
        if include is not None and not include(name, mod):
            continue
        if name in heads:
            skipped.append((name, heads[name]))
            continue
        layer_recipe = _layer_recipe(mod, converted, recipe)
        if layer_recipe is None:
            continue            # plain nn.Linear without a recipe: runs in high precision
        if not layer_recipe.quantized:
            skipped.append((name, f"recipe {layer_recipe.name!r} quantizes no GEMM"))
            continue
        why = _dims_reason(mod, layer_recipe)
        if why:
            skipped.append((name, why))
            continue
        layers.append((name, mod, converted))
    return layers, skipped

