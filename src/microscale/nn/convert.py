"""``ms.convert``: swap a model's ``nn.Linear`` layers for ``ms.Linear`` in place.

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

Layers whose feature sizes the recipe's blocks cannot tile (e.g. ``in_features = 100`` with
NVFP4's 16) raise a ``ValueError`` naming the module path; ``on_error="skip"`` keeps them in
high precision instead and records why in the report. Conversion is all-or-nothing: when it
raises, the model is unchanged. The returned :class:`ConversionReport`
lists every converted layer and every Linear/Embedding left alone, with the reason.
Conversion copies the parameters into fp32 masters; forward hooks on replaced modules are not
carried over.
"""

from __future__ import annotations

import fnmatch
import logging
import math
from dataclasses import dataclass, field
from typing import Callable

from torch import nn

from ..recipe import Recipe
from .linear import Linear

__all__ = ["convert", "ConversionReport", "find_blocks"]

_HEAD_NAMES = ("lm_head", "head", "output", "classifier")
log = logging.getLogger(__name__)


@dataclass
class ConversionReport:
    """What :func:`convert` did: ``converted`` names, ``kept`` name -> reason."""

    recipe: str
    converted: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    blocks: str | None = None            # path of the block container ("" = the model itself)
    n_blocks: int = 0

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "converted": list(self.converted), "kept": dict(self.kept),
                "blocks": self.blocks, "n_blocks": self.n_blocks}

    def __str__(self) -> str:
        rows = [(n, "converted", self.recipe) for n in self.converted]
        rows += [(n, "kept", why) for n, why in self.kept.items()]
        width = max([len(r[0]) for r in rows] + [6])
        where = "none found" if self.blocks is None else \
            f"{self.blocks or '<model>'} ({self.n_blocks})"
        lines = [f"convert: {len(self.converted)} converted to {self.recipe}, "
                 f"{len(self.kept)} kept in high precision; blocks: {where}",
                 f"{'module':<{width}}  {'action':<9}  detail", "-" * (width + 30)]
        lines += [f"{n:<{width}}  {a:<9}  {d}" for n, a, d in rows]
        return "\n".join(lines)


def find_blocks(model: nn.Module) -> tuple[str | None, list[str]]:
    """``(container path, [block paths])`` of the largest list of same-typed repeated modules."""
    best_name, best = None, []
    for name, mod in model.named_modules():
        if not isinstance(mod, (nn.ModuleList, nn.Sequential)):
            continue
        kids = list(mod.named_children())
        if len(kids) >= 2 and len({type(m) for _, m in kids}) == 1 and len(kids) > len(best):
            best_name, best = name, [f"{name}.{k}" if name else k for k, _ in kids]
    return best_name, best


def _block_of(name: str, blocks: list[str]) -> int | None:
    for i, b in enumerate(blocks):
        if name == b or name.startswith(b + "."):
            return i
    return None


def _find_heads(model: nn.Module) -> dict[str, str]:
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    vocab = {e.num_embeddings for e in embeddings}
    emb_weights = {id(e.weight) for e in embeddings}
    heads, last_vocab = {}, None
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        if name.rsplit(".", 1)[-1] in _HEAD_NAMES:
            heads[name] = f"output head (named {name.rsplit('.', 1)[-1]!r})"
        elif id(mod.weight) in emb_weights:
            heads[name] = "output head (weight tied to an embedding)"
        if mod.out_features in vocab:
            last_vocab = name
    if last_vocab is not None and last_vocab not in heads:
        out = model.get_submodule(last_vocab).out_features
        heads[last_vocab] = f"output head (out_features {out} = embedding vocabulary)"
    return heads


def _block_rule(spec: str, n_blocks: int) -> tuple[set[int], str] | None:
    """Block indices for "first:N" / "last:N" / "last_fraction:F"; None for a plain pattern."""
    kind, _, arg = spec.partition(":")
    if kind not in ("first", "last", "last_fraction") or not arg:
        return None
    try:
        value = float(arg) if kind == "last_fraction" else int(arg)
    except ValueError:
        raise ValueError(f"keep_high_precision: cannot parse {spec!r} "
                         "(expected first:N, last:N or last_fraction:F)") from None
    if value < 0 or (kind == "last_fraction" and value > 1):
        raise ValueError(f"keep_high_precision: {spec!r} is out of range")
    n = math.ceil(value * n_blocks) if kind == "last_fraction" else min(int(value), n_blocks)
    idx = set(range(n)) if kind == "first" else set(range(n_blocks - n, n_blocks))
    return idx, spec


def _keep_rule(keep, recipe: Recipe, blocks: list[str]) -> Callable[[str, nn.Module], str | None]:
    """Turn ``keep_high_precision`` into ``rule(name, module) -> reason or None``."""
    if callable(keep):
        return lambda name, mod: "keep_high_precision callable" if keep(name, mod) else None
    if keep is None:
        frac = recipe.hp_last_fraction
        specs = [f"last_fraction:{frac}"] if frac > 0 else []
    elif isinstance(keep, str):
        specs = [keep]
    elif isinstance(keep, (list, tuple)) and all(isinstance(k, str) for k in keep):
        specs = list(keep)
    else:
        raise TypeError("keep_high_precision must be None, a string, a list of strings or a "
                        f"callable(name, module) -> bool, got {type(keep).__name__}")
    block_rules, patterns = [], []
    for spec in specs:
        rule = _block_rule(spec, len(blocks))
        (block_rules if rule else patterns).append(rule or spec)

    def rule(name: str, mod: nn.Module) -> str | None:
        i = _block_of(name, blocks)
        for idx, spec in block_rules:
            if i is not None and i in idx:
                rule.matched.add(spec)
                return f"block {i} of {len(blocks)} ({spec})"
        for pat in patterns:
            if fnmatch.fnmatchcase(name, pat):
                rule.matched.add(pat)
                return f"matches {pat!r}"
        return None
    # the user's rules that must match something (the recipe's default and "first:0" need not)
    rule.specs = [] if keep is None else [s for s in specs if not _selects_nothing(s)]
    rule.matched = set()
    return rule


def _selects_nothing(spec: str) -> bool:
    """``"first:0"``, ``"last:0"``, ``"last_fraction:0"``: nothing, on purpose."""
    kind, _, arg = spec.partition(":")
    try:
        return kind in ("first", "last", "last_fraction") and float(arg) == 0
    except ValueError:
        return False


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


def _mha_children(model: nn.Module) -> set[str]:
    return {f"{n}.{c}" if n else c for n, m in model.named_modules()
            if isinstance(m, nn.MultiheadAttention) for c, _ in m.named_children()}


def _try_convert(name: str, mod: nn.Linear, recipe: Recipe, on_error: str) -> Linear | str:
    """The new layer, or (on_error="skip") the reason it stays high precision."""
    try:
        return Linear.from_linear(mod, recipe, name=name)
    except ValueError as err:
        if on_error == "raise":
            raise ValueError(f"convert: cannot convert {name!r}: {err}") from None
    return (f"size not tileable by {recipe.name} (on_error='skip'): in={mod.in_features}, "
            f"out={mod.out_features}, need multiples {recipe.required_multiples()}")


def convert(model: nn.Module, recipe: str | Recipe = "nvfp4", keep_high_precision=None, *,
            on_error: str = "raise", on_unmatched: str = "raise") -> ConversionReport:
    """Replace ``model``'s ``nn.Linear`` layers with ``ms.Linear`` in place; see the module doc.

    Args:
        model: any ``nn.Module`` (modified in place).
        recipe: a preset name or a :class:`Recipe`.
        keep_high_precision: which block linears stay ``nn.Linear`` (table above).
        on_error: ``"raise"`` (default) or ``"skip"`` for layers the recipe cannot tile.
        on_unmatched: ``"raise"`` (default), ``"warn"`` or ``"ignore"`` for a
            ``keep_high_precision`` rule that matches no linear layer.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert expects an nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Linear):
        raise ValueError("convert cannot replace the model itself; use "
                         "ms.Linear.from_linear(linear, recipe) for a lone nn.Linear")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if on_unmatched not in ("raise", "warn", "ignore"):
        raise ValueError(f"on_unmatched must be 'raise', 'warn' or 'ignore', got {on_unmatched!r}")
    recipe = Recipe.parse(recipe)
    blocks_name, blocks = find_blocks(model)
    report = ConversionReport(recipe.name, blocks=blocks_name, n_blocks=len(blocks))
    keep, heads, mha = _keep_rule(keep_high_precision, recipe, blocks), _find_heads(model), \
        _mha_children(model)
    swaps = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Embedding):
            report.kept[name] = "embedding (never converted)"
        if not isinstance(mod, nn.Linear) or not name:
            continue
        reason = heads.get(name) or ("inside nn.MultiheadAttention" if name in mha else None)
        kept = keep(name, mod)           # asked of every linear, so a matching rule counts
        new = reason or kept or _try_convert(name, mod, recipe, on_error)
        if isinstance(new, str):
            report.kept[name] = new
        else:
            swaps.append((name, new))
    _report_unmatched(keep, blocks, on_unmatched)
    for name, new in swaps:          # only after every layer converted: no half-done model
        parent_name, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent_name), leaf, new)
        report.converted.append(name)
    return report
