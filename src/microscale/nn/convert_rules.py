"""How :func:`~microscale.nn.convert.convert` reads a model: blocks, heads, swappable layers
and the ``keep_high_precision`` rules.

* :func:`find_blocks`: the model's repeated blocks (the children of the largest
  ``nn.ModuleList`` / ``nn.Sequential`` whose children all have one type);
* ``_find_heads``: the output heads (by name, by a weight tied to an embedding, or by the
  vocabulary size outside the blocks);
* ``_is_candidate`` / ``_is_experts`` / ``_mha_children``: the layers ``convert`` can swap
  (``nn.Linear``, HF ``Conv1D``, fused 3-D MoE experts) and those inside
  ``nn.MultiheadAttention`` it must leave alone;
* ``_keep_rule``: ``keep_high_precision`` (``None``, ``"first:N"``, ``"last:N"``,
  ``"last_fraction:F"``, fnmatch patterns, a list of those, a callable) as
  ``rule(name, module) -> reason or None``, remembering which user rules matched.

What each rule means, and how ``convert`` reports a rule that matches nothing: the docstring of
:mod:`microscale.nn.convert`.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Callable

from torch import nn

from ..recipe import Recipe
from .coverage import gemm_dims
from .experts import QuantizedExperts
from .transposed import is_conv1d

__all__ = ["find_blocks"]

_HEAD_NAMES = ("lm_head", "head", "output", "classifier")


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
    """Output heads by name, by a weight tied to an embedding, or else (no head found so) the
    last linear outside the repeated blocks whose out_features is an embedding's vocabulary.
    A layer inside a block is never a head by shape alone: a 125m decoder with a 256-token
    vocabulary has 256-wide v projections."""
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    vocab = {e.num_embeddings for e in embeddings}
    emb_weights = {id(e.weight) for e in embeddings}
    _, blocks = find_blocks(model)
    heads, last_vocab = {}, None
    for name, mod in model.named_modules():
        if not _is_candidate(mod):
            continue
        if name.rsplit(".", 1)[-1] in _HEAD_NAMES:
            heads[name] = f"output head (named {name.rsplit('.', 1)[-1]!r})"
        elif id(mod.weight) in emb_weights:
            heads[name] = "output head (weight tied to an embedding)"
        if gemm_dims(mod)[1] in vocab and _block_of(name, blocks) is None:
            last_vocab = name
    if last_vocab is not None and not heads:
        out = gemm_dims(model.get_submodule(last_vocab))[1]
        heads[last_vocab] = f"output head (out_features {out} = embedding vocabulary)"
    return heads


def _is_candidate(mod: nn.Module) -> bool:
    """A layer convert can swap: nn.Linear or HF Conv1D (not an ms.Linear already)."""
    return isinstance(mod, nn.Linear) or is_conv1d(mod)


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


def _is_experts(mod: nn.Module) -> bool:
    """Fused MoE experts: 3-D ``gate_up_proj`` and ``down_proj`` (HF transformers 5, the zoo)."""
    if isinstance(mod, QuantizedExperts):
        return False
    gu, down = getattr(mod, "gate_up_proj", None), getattr(mod, "down_proj", None)
    return isinstance(gu, nn.Parameter) and isinstance(down, nn.Parameter) and gu.dim() == 3 \
        and down.dim() == 3


def _mha_children(model: nn.Module) -> set[str]:
    return {f"{n}.{c}" if n else c for n, m in model.named_modules()
            if isinstance(m, nn.MultiheadAttention) for c, _ in m.named_children()}
