"""Gradient fidelity: how close is each layer's quantized weight gradient to the bf16 one, and is
its error biased?

At a small scale the loss curves of two recipes often cannot be told apart from seed noise,
while the gradients they feed the optimizer can: this module measures them directly. For one set
of weights (a snapshot of a bf16 run) and one set of batches, it computes the *reference*
gradients of the plain model (bf16 autocast, the bf16 run's own numerics) and, for every
variant, the gradients of the same weights converted to that variant's recipe, on the same
batches. The whole network runs quantized (fprop, dgrad and wgrad as in training), so a layer's
dW carries its own wgrad error and the errors of every quantized GEMM upstream of it.

Per linear layer ``l``, batch ``b`` and stochastic-rounding draw ``d`` (the error
``e = dW_q − dW_ref`` and ``g = dW_ref``, all fp32)::

    cos        <dW_q, g> / (|dW_q| |g|)                  averaged over the samples
    rel_err    |e| / |g|                                  averaged over the samples
    bias_rel   |ē| / |ḡ|       ē, ḡ: means over all samples (b, d)
    bias_proj  <ē, ḡ> / |ḡ|²   signed: < 0 means the quantized gradient is shrunk along the
                               true one (flushes to zero do that), > 0 inflated
    bias_floor sqrt(mean |e|² / n) / |ḡ|   what bias_rel would be if the errors were zero-mean
                               and independent over the n samples: bias_rel ≈ bias_floor means
                               "unbiased at this resolution"; bias_rel ≫ bias_floor is a bias

Stochastic rounding is unbiased per element, so with SR the mean error over draws shrinks like
1/sqrt(draws); round-to-nearest gives the same error every draw, so its bias stays at the error
itself. That is the paper's argument for SR on gradients, measured. Recipes without stochastic
rounding are drawn once per batch (more draws would be identical). The measurement is end to
end, so the part of the error that is the same in every draw (the round-to-nearest operands:
fprop's x and W, the backward's RNE operands) stays in the bias however many draws are taken:
read SR's effect as the difference between a recipe's bias and its error, and between ``nvfp4``
and ``nvfp4_no_sr``, not as a bias of zero.

Aggregates: ``ALL`` treats the gradients of all layers as one vector (same formulas on the
concatenation); ``MEAN`` is the unweighted mean of the per-layer values. Rows also carry
``isolated_rel_err``: :func:`~microscale.analyze`'s ``wgrad.dw`` relative error, the error of
the layer's wgrad GEMM alone on the reference's own ``x`` and ``dy`` (no upstream errors).

A ``bf16`` variant repeats the reference computation: its numbers are the floor of the
measurement (zero on CPU; on a GPU, non-deterministic kernels make it small but not zero).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Variant", "grad_fidelity", "linear_weights", "lm_loss"]


@dataclass(frozen=True)
class Variant:
    """A recipe as trained: preset, high-precision layer set and precision switch."""

    name: str
    recipe: str = "bf16"
    keep_hp: str | None = None          # harness --keep-hp syntax ("none" = every block quantized)
    switch_step: int | None = None      # bf16 GEMMs from this step on (PrecisionSchedule)
    switch_mode: str = "all"


def lm_loss(model: nn.Module, batch) -> torch.Tensor:
    """Next-token cross-entropy of the harness's ``(inputs, targets)`` batches under bf16 autocast."""
    x, y = batch
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        logits = model(x)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


def linear_weights(model: nn.Module) -> dict[str, nn.Parameter]:
    """The weight of every ``nn.Linear`` / ``ms.Linear`` by module name."""
    from ..nn.linear import Linear

    return {name: m.weight for name, m in model.named_modules() if isinstance(m, (nn.Linear, Linear))}


def _grads(model: nn.Module, batch, loss_fn) -> dict[str, torch.Tensor]:
    weights = linear_weights(model)
    model.zero_grad(set_to_none=True)
    loss_fn(model, batch).backward()
    return {n: (w.grad.detach().float().clone() if w.grad is not None else torch.zeros_like(w, dtype=torch.float32))
            for n, w in weights.items()}


def _variant_model(reference: nn.Module, variant: Variant, step: int) -> nn.Module:
    """A deep copy of ``reference`` converted (and switched) as the variant trains at ``step``."""
    import microscale as ms

    from ..train.trainer import keep_hp_arg

    model = copy.deepcopy(reference)
    if variant.recipe == "bf16":
        return model
    kwargs = {} if variant.keep_hp is None else {"keep_high_precision": keep_hp_arg(variant.keep_hp)}
    ms.convert(model, variant.recipe, **kwargs)
    if variant.switch_step is not None:
        ms.PrecisionSchedule(variant.switch_step, variant.switch_mode).apply(model, step)
    return model


def _quantized_wgrad(model: nn.Module) -> set[str]:
    """Layers whose wgrad runs quantized in this variant (converted, not switched to all-bf16)."""
    from ..nn.linear import Linear

    return {n for n, m in model.named_modules() if isinstance(m, Linear) and not m.high_precision}


def _stochastic(variant: Variant) -> bool:
    from ..recipe import Recipe, Rounding

    if variant.recipe == "bf16":
        return False
    recipe = Recipe.from_name(variant.recipe)
    return any(op.rounding == Rounding.STOCHASTIC for g in recipe.gemms.values() for op in (g.a, g.b))


class _Stats:
    """Running sums for one layer (or the ALL aggregate, fed per-layer sums)."""

    def __init__(self):
        self.n, self.cos, self.rel, self.e2 = 0, 0.0, 0.0, 0.0
        self.sum_e: torch.Tensor | None = None
        self.sum_g: torch.Tensor | None = None

    def add(self, g_q: torch.Tensor, g: torch.Tensor) -> tuple[float, float, float, float]:
        e = g_q - g
        dot, qq, gg, ee = (float(v) for v in torch.stack([(g_q * g).sum(), (g_q * g_q).sum(),
                                                         (g * g).sum(), (e * e).sum()]).double().tolist())
        self.add_scalars(dot, qq, gg, ee)
        self.sum_e = e.clone() if self.sum_e is None else self.sum_e.add_(e)
        self.sum_g = g.clone() if self.sum_g is None else self.sum_g.add_(g)
        return dot, qq, gg, ee

    def add_scalars(self, dot: float, qq: float, gg: float, ee: float) -> None:
        self.n += 1
        self.cos += dot / math.sqrt(qq * gg) if qq > 0 and gg > 0 else 0.0
        self.rel += math.sqrt(ee / gg) if gg > 0 else 0.0
        self.e2 += ee

    def bias_sums(self) -> tuple[float, float, float]:
        """(<ē,ḡ>, |ē|², |ḡ|²) of this layer's mean error and mean reference gradient."""
        e_bar, g_bar = self.sum_e / self.n, self.sum_g / self.n
        return float((e_bar * g_bar).sum()), float((e_bar * e_bar).sum()), float((g_bar * g_bar).sum())

    def row(self, bias: tuple[float, float, float]) -> dict:
        eg, ee, gg = bias
        norm_g = math.sqrt(gg) if gg > 0 else float("nan")
        return {"cos": self.cos / self.n, "rel_err": self.rel / self.n, "bias_rel": math.sqrt(ee) / norm_g,
                "bias_proj": eg / gg if gg > 0 else float("nan"),
                "bias_floor": math.sqrt(self.e2 / self.n / self.n) / norm_g, "samples": self.n}


def _measure(model: nn.Module, ref_grads: list[dict], batches, loss_fn, draws: int, seed: int) -> dict:
    """Per-layer rows plus ALL for one variant's model over every (batch, draw)."""
    layers = {n: _Stats() for n in ref_grads[0]}
    total = _Stats()
    for b, batch in enumerate(batches):
        for d in range(draws):
            torch.manual_seed(seed + 1000 * b + d)            # the SR stream of this draw
            grads = _grads(model, batch, loss_fn)
            sums = [layers[n].add(grads[n], ref_grads[b][n]) for n in layers]
            total.add_scalars(*(sum(s[i] for s in sums) for i in range(4)))
    rows = {n: st.row(st.bias_sums()) for n, st in layers.items()}
    parts = [st.bias_sums() for st in layers.values()]
    rows["ALL"] = total.row(tuple(sum(p[i] for p in parts) for i in range(3)))
    return rows


def _isolated(reference: nn.Module, batch, recipe: str, cache: dict) -> dict:
    """``ms.analyze``'s wgrad.dw relative error per layer (the wgrad GEMM alone), cached by recipe."""
    if recipe == "bf16":
        return {}
    if recipe not in cache:
        from .analyze import analyze

        report = analyze(reference, batch[0], recipe,
                         loss_fn=lambda logits: F.cross_entropy(logits.float().flatten(0, 1), batch[1].flatten()))
        cache[recipe] = {row["name"]: row["rel_err"].get("wgrad.dw") for row in report.layers}
    return cache[recipe]


def grad_fidelity(make_model: Callable[[], nn.Module], state: dict, batches: Sequence, variants: Sequence[Variant],
                  *, draws: int = 4, step: int = 0, seed: int = 0, isolated: bool = True,
                  loss_fn: Callable = lm_loss) -> list[dict]:
    """Rows ``{variant, step, layer, index, cos, rel_err, bias_rel, bias_proj, bias_floor, samples,
    isolated_rel_err}`` for every variant and layer, plus the ``ALL`` and ``MEAN`` aggregates.

    ``make_model()`` builds the plain model (``nn.Linear`` layers) on its device; ``state`` is
    loaded into it; ``batches`` are what ``loss_fn(model, batch)`` takes (default: the
    harness's ``(inputs, targets)`` with :func:`lm_loss`).
    """
    if draws < 1 or not batches or not variants:
        raise ValueError("grad_fidelity needs draws >= 1, at least one batch and one variant")
    reference = make_model()
    reference.load_state_dict(state)
    reference.train()
    ref_grads = [_grads(reference, batch, loss_fn) for batch in batches]
    order = {n: i for i, n in enumerate(ref_grads[0])}
    rows, cache = [], {}
    for variant in variants:
        model = _variant_model(reference, variant, step)
        n_draws = draws if _stochastic(variant) else 1
        per_layer = _measure(model, ref_grads, batches, loss_fn, n_draws, seed)
        iso = _isolated(reference, batches[0], variant.recipe, cache) if isolated else {}
        iso = {n: v for n, v in iso.items() if n in _quantized_wgrad(model)}
        for name, row in per_layer.items():
            rows.append({"variant": variant.name, "recipe": variant.recipe, "step": step, "layer": name,
                         "index": order.get(name, -1), **row, "isolated_rel_err": iso.get(name)})
        rows.append(_mean_row(rows, variant, step))
        del model
    return rows


def _mean_row(rows: list[dict], variant: Variant, step: int) -> dict:
    mine = [r for r in rows if r["variant"] == variant.name and r["step"] == step and r["index"] >= 0]
    keys = ("cos", "rel_err", "bias_rel", "bias_proj", "bias_floor")
    out = {k: sum(r[k] for r in mine) / len(mine) for k in keys}
    iso = [r["isolated_rel_err"] for r in mine if r["isolated_rel_err"] is not None]
    return {"variant": variant.name, "recipe": variant.recipe, "step": step, "layer": "MEAN", "index": -1,
            **out, "samples": mine[0]["samples"], "isolated_rel_err": sum(iso) / len(iso) if iso else None}
