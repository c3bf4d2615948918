"""``ms.convert``: swap a model's ``nn.Linear`` and HF ``Conv1D`` layers for ``ms.Linear`` in place.

Which layers stay in high precision (SPEC §9)
=============================================
The NVFP4 recipe quantizes the linear layers of the transformer blocks and nothing else:

* embeddings (they are not GEMMs) and the **output head** are never converted. A head is the
  last ``nn.Linear`` whose ``out_features`` equals an embedding's ``num_embeddings`` (the
  vocabulary), a Linear whose weight *is* an embedding's weight (tied), or a Linear whose own
  name (the last path component) is ``lm_head``, ``head``, ``output`` or ``classifier``;
* linears inside ``nn.MultiheadAttention`` (it reads ``out_proj.weight`` functionally);
* the linears of the **last blocks**: by default ``ceil(recipe.hp_last_fraction · n_blocks)``
  of them (15% for ``"nvfp4"``, 0% for the FP8/MXFP8 presets). *Blocks* are the children of
  the largest ``nn.ModuleList`` / ``nn.Sequential`` whose children all have one type (at least
  two of them): ``model.blocks``, ``model.transformer.h``, ``model.layers``...

``keep_high_precision`` replaces the default block rule (heads and embeddings stay regardless):

======================== ==============================================================
``None``                 the last ``recipe.hp_last_fraction`` of the blocks (rounded up)
``"blocks.0.*"``         fnmatch pattern on the module path
``"first:N"``            the linears of the first N blocks
``"last:N"``             ... of the last N blocks
``"last_fraction:F"``    ... of the last ``ceil(F · n_blocks)`` blocks
a list of the above      the union (the paper's 12B run: ``["first:2", "last:8"]``)
``callable(name, mod)``  True keeps the module
======================== ==============================================================

A rule that matches no module is almost always a typo (``"frist:2"``, ``"block.*.fc1"``) and
would silently convert the layers it was meant to keep, so by default it raises a ValueError
naming the rule; ``on_unmatched="warn"`` logs a warning instead (``"ignore"``: nothing). Rules
that select nothing on purpose (``"first:0"``, ``"last_fraction:0"``, ``[]``) are fine; the
recipe's default rule is never reported.

``module_filter_fn(module, fqn) -> bool`` (the torchao convention) is applied on top: a layer
it returns False for stays high precision.

The rules above (blocks, heads, swappable layers, ``keep_high_precision``) are implemented in
:mod:`microscale.nn.convert_rules`; this module decides per layer, swaps and reports.

Layers smaller than one block in either dimension (MoE routers and gates, e.g. Qwen2-MoE's
1-output ``shared_expert_gate`` against NVFP4's 16) stay in high precision with that reason.
Larger layers whose feature sizes the blocks cannot tile (``in_features = 100`` with NVFP4's
16) raise a ``ValueError`` naming the module path; ``on_error="skip"`` keeps them instead.
Conversion is all-or-nothing: when it raises, the model is unchanged.

Fused mixture-of-experts modules (3-D ``gate_up_proj [E, 2I, H]`` and ``down_proj [E, H, I]``:
Mixtral, Qwen2/3-MoE, DeepSeek-V3 and OLMoE in transformers 5, the zoo's MoE decoder) become
:class:`~microscale.nn.experts.QuantizedExperts`: every expert's GEMMs quantized as an
``ms.Linear`` on its tokens (:mod:`microscale.nn.grouped`). They follow the same rules (block
rules, patterns, ``module_filter_fn``, tileability); a layout it cannot run (biases, transposed
weights, a custom gate) stays high precision with the reason. MoE routers (a ``[E, H]``
parameter applied with ``F.linear``) and tiny gates stay high precision: the report says so.

Hugging Face ``Conv1D`` layers (GPT-2; weight stored ``[in, out]``) become
:class:`~microscale.nn.TransposedLinear`: the same numerics as ``ms.Linear`` of the equivalent
``nn.Linear``, with the master kept in the Conv1D layout so checkpoints keep their shapes.

The report: every GEMM accounted for
====================================
The returned :class:`ConversionReport` lists every converted layer and everything that does a
matrix multiply but stays in high precision, with the reason: embeddings, the head, kept
blocks, layers too small or not tileable, and parameters of module types ``convert`` cannot
swap (fused 3-D MoE experts, routers, ``nn.MultiheadAttention``'s ``in_proj_weight``; see
:mod:`microscale.nn.coverage`). When more than 10% of the blocks' GEMM weights stay in high
precision for reasons other than ``keep_high_precision`` / ``module_filter_fn``, ``convert``
also issues a ``UserWarning`` that states the share. The record of the conversion is stored on
a Hugging Face model's config (:mod:`microscale.nn.record`), so ``save_pretrained`` writes it.

Conversion copies the parameters into fp32 masters (which then stay fp32 through
``model.to(dtype)``); forward hooks on replaced modules are not carried over.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from torch import nn

from ..recipe import Recipe
# blocks, heads, swappable layers, keep rules (private names re-exported too: old import paths)
from .convert_rules import (  # noqa: F401
    _HEAD_NAMES,
    _block_of,
    _block_rule,
    _find_heads,
    _is_candidate,
    _is_experts,
    _keep_rule,
    _mha_children,
    _selects_nothing,
    find_blocks,
)
from .coverage import GemmShare, gemm_dims, unconverted_matmuls, warn_if_mostly_high_precision
from .experts import QuantizedExperts, expert_layout
from .linear import Linear
from .record import conversion_record, read_stamp, stamp
from .transposed import TransposedLinear, is_conv1d

__all__ = ["convert", "ConversionReport", "find_blocks"]

log = logging.getLogger(__name__)


@dataclass
class ConversionReport:
    """What :func:`convert` did.

    ``converted``: the swapped layers. ``kept``: name -> reason for every module or parameter
    doing a matrix multiply that stays high precision (and the embeddings). ``gemm_share``: the
    blocks' GEMM weight elements by outcome; ``warning``: the share warning, if one was issued.
    """

    recipe: str
    converted: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    blocks: str | None = None            # path of the block container ("" = the model itself)
    n_blocks: int = 0
    gemm_share: GemmShare = field(default_factory=GemmShare)   # block GEMM weights by outcome
    warning: str | None = None           # the high-precision-share warning, when one was issued

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "converted": list(self.converted), "kept": dict(self.kept),
                "blocks": self.blocks, "n_blocks": self.n_blocks,
                "gemm_params": self.gemm_share.to_dict()}

    def __str__(self) -> str:
        rows = [(n, "converted", self.recipe) for n in self.converted]
        rows += [(n, "kept", why) for n, why in self.kept.items()]
        width = max([len(r[0]) for r in rows] + [6])
        where = "none found" if self.blocks is None else \
            f"{self.blocks or '<model>'} ({self.n_blocks})"
        lines = [f"convert: {len(self.converted)} converted to {self.recipe}, "
                 f"{len(self.kept)} kept in high precision; blocks: {where}",
                 self.gemm_share.describe(),
                 f"{'module':<{width}}  {'action':<9}  detail", "-" * (width + 30)]
        lines += [f"{n:<{width}}  {a:<9}  {d}" for n, a, d in rows]
        return "\n".join(lines)


def _report_unmatched(rule, blocks: list[str], on_unmatched: str) -> None:
    """Raise (or warn) for each ``keep_high_precision`` rule that matched no linear layer."""
    unmatched = [s for s in getattr(rule, "specs", []) if s not in rule.matched]
    if not unmatched or on_unmatched == "ignore":
        return
    msg = (f"keep_high_precision rule(s) {', '.join(map(repr, unmatched))} matched no linear "
           f"layer (block rules are first:N, last:N, last_fraction:F over the "
           f"{len(blocks)} blocks found; anything else is an fnmatch pattern on module paths); "
           "pass on_unmatched='warn' to convert anyway")
    if on_unmatched == "raise":
        raise ValueError(msg)
    log.warning(msg)


def _gemm_numel(mod: nn.Module) -> int:
    if isinstance(mod, QuantizedExperts) or _is_experts(mod):
        return mod.gate_up_proj.numel() + mod.down_proj.numel()
    return mod.weight.numel()


def _new_layer(name: str, mod: nn.Module, recipe: Recipe, on_error: str) -> Linear | str:
    """The new layer, or (on_error="skip") the reason it stays high precision."""
    try:
        if is_conv1d(mod):
            return TransposedLinear.from_conv1d(mod, recipe, name=name)
        return Linear.from_linear(mod, recipe, name=name)
    except ValueError as err:
        if on_error == "raise":
            raise ValueError(f"convert: cannot convert {name!r}: {err}") from None
    in_f, out_f = gemm_dims(mod)
    return (f"size not tileable by {recipe.name} (on_error='skip'): in={in_f}, "
            f"out={out_f}, need multiples {recipe.required_multiples()}")


class _Decider:
    """Per layer: the new module, or why it stays high precision and whether that was asked."""

    def __init__(self, model: nn.Module, recipe: Recipe, keep, module_filter_fn, on_error: str,
                 blocks: list[str]):
        self.recipe, self.on_error, self.filter = recipe, on_error, module_filter_fn
        self.keep = _keep_rule(keep, recipe, blocks)
        self.heads, self.mha = _find_heads(model), _mha_children(model)
        self.need = recipe.required_multiples()

    def __call__(self, name: str, mod: nn.Module) -> tuple[Linear | str, bool]:
        reason = self.keep(name, mod)        # asked of every layer, so a matching rule counts
        if name in self.heads:
            return self.heads[name], True
        if name in self.mha:
            return "inside nn.MultiheadAttention (it reads out_proj.weight functionally)", False
        if reason:
            return reason, True
        if self.filter is not None and not self.filter(mod, name):
            return "module_filter_fn returned False", True
        in_f, out_f = gemm_dims(mod)
        if in_f < self.need["in"] or out_f < self.need["out"]:
            return (f"smaller than one {self.recipe.name} block (in={in_f}, out={out_f}; blocks "
                    f"need multiples of {self.need['in']}/{self.need['out']}), e.g. a router "
                    "or gate"), False
        return _new_layer(name, mod, self.recipe, self.on_error), False

    def experts(self, name: str, mod: nn.Module) -> tuple[QuantizedExperts | str, bool]:
        """Fused experts: a :class:`QuantizedExperts`, or why they stay high precision."""
        reason = self.keep(name, mod)
        if reason:
            return reason, True
        if self.filter is not None and not self.filter(mod, name):
            return "module_filter_fn returned False", True
        why = expert_layout(mod)
        if why is not None:
            return f"fused MoE experts not swapped: {why}", False
        _, two_i, hidden = mod.gate_up_proj.shape
        bad = [f"{d}={v}" for d, v in (("hidden", hidden), ("intermediate", two_i // 2))
               if v % self.need["in"] or v % self.need["out"]]
        if not bad:
            return QuantizedExperts.from_experts(mod, self.recipe, name=name), False
        msg = (f"size not tileable by {self.recipe.name}: {', '.join(bad)}, need multiples of "
               f"{max(self.need['in'], self.need['out'])}")
        if self.on_error == "raise":
            raise ValueError(f"convert: cannot convert {name!r}: {msg}")
        return msg + " (on_error='skip')", False


def _count_share(model: nn.Module, blocks: list[str], outcome: dict[str, bool | None],
                 unsupported: dict[str, tuple[str, int]]) -> GemmShare:
    """Weight elements of the GEMMs inside the blocks (the whole model if none) by outcome:
    ``outcome[name]`` is None for quantized, True for kept by choice, False for kept otherwise."""
    share = GemmShare()
    in_scope = (lambda n: _block_of(n, blocks) is not None) if blocks else (lambda n: True)
    for name, mod in model.named_modules():
        if isinstance(mod, (Linear, QuantizedExperts)) and name not in outcome:
            outcome[name] = None                  # converted by an earlier convert call
        if name not in outcome or not in_scope(name):
            continue
        n, kind = _gemm_numel(mod), outcome[name]
        if kind is None:
            share.quantized += n
        elif kind:
            share.kept_by_choice += n
        else:
            share.kept_other += n
    share.kept_other += sum(n for p, (_, n) in unsupported.items() if in_scope(p))
    return share


def convert(model: nn.Module, recipe: str | Recipe = "nvfp4", keep_high_precision=None, *,
            on_error: str = "raise", module_filter_fn=None,
            on_unmatched: str = "raise") -> ConversionReport:
    """Replace ``model``'s ``nn.Linear`` / HF ``Conv1D`` layers with ``ms.Linear`` in place.

    Args:
        model: any ``nn.Module`` (modified in place).
        recipe: a preset name or a :class:`Recipe`.
        keep_high_precision: which block linears stay high precision (table in the module doc).
        on_error: ``"raise"`` (default) or ``"skip"`` for layers the recipe cannot tile.
        module_filter_fn: optional ``fn(module, fqn) -> bool``; False keeps the layer.
        on_unmatched: ``"raise"`` (default), ``"warn"`` or ``"ignore"`` for a
            ``keep_high_precision`` rule that matches no layer.
    """
    _check_args(model, on_error, module_filter_fn, on_unmatched)
    recipe = Recipe.parse(recipe)
    blocks_name, blocks = find_blocks(model)
    report = ConversionReport(recipe.name, blocks=blocks_name, n_blocks=len(blocks))
    decide = _Decider(model, recipe, keep_high_precision, module_filter_fn, on_error, blocks)
    swaps, outcome = [], {}
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Embedding):
            report.kept[name] = "embedding (never converted)"
        if not name or not (_is_candidate(mod) or _is_experts(mod)):
            continue
        new, by_choice = decide.experts(name, mod) if _is_experts(mod) else decide(name, mod)
        if isinstance(new, str):
            report.kept[name], outcome[name] = new, by_choice
        else:
            swaps.append((name, new))
            outcome[name] = None
    _report_unmatched(decide.keep, blocks, on_unmatched)
    for name, new in swaps:          # only after every layer converted: no half-done model
        parent_name, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent_name), leaf, new)
        report.converted.append(name)
    unsupported = unconverted_matmuls(model, exclude=set(outcome))
    report.kept.update({path: why for path, (why, _) in unsupported.items()})
    report.gemm_share = _count_share(model, blocks, outcome, unsupported)
    others = [f"{n}: {w}" for n, w in report.kept.items() if outcome.get(n) is False] + \
        [f"{p}: {w}" for p, (w, _) in unsupported.items()]
    report.warning = warn_if_mostly_high_precision(report.gemm_share, others)
    previous = read_stamp(model) or {}
    stamp(model, conversion_record(model, {**previous.get("kept", {}), **report.kept}))
    return report


def _check_args(model, on_error: str, module_filter_fn, on_unmatched: str) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert expects an nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Linear) or is_conv1d(model):
        raise ValueError("convert cannot replace the model itself; use "
                         "ms.Linear.from_linear(linear, recipe) for a lone nn.Linear")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if on_unmatched not in ("raise", "warn", "ignore"):
        raise ValueError(f"on_unmatched must be 'raise', 'warn' or 'ignore', got {on_unmatched!r}")
    if module_filter_fn is not None and not callable(module_filter_fn):
        raise TypeError("module_filter_fn must be a callable(module, fqn) -> bool, got "
                        f"{type(module_filter_fn).__name__}")
