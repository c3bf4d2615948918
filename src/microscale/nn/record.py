"""The conversion record: which layers a model converted, with which recipe, and why the rest not.

A converted model's weights alone do not say how to rebuild it: ``save_pretrained`` and
``safetensors.torch.save_model`` write tensors, and a plain ``from_pretrained`` builds plain
``nn.Linear`` layers (and Hugging Face's own fused experts). The record is the missing half,
small and JSON-able::

    {"version": 1,
     "microscale_version": "0.1.0",
     "recipes":   {"nvfp4": {...Recipe.to_dict()...}},
     "converted": {"model.layers.0.self_attn.q_proj": "nvfp4",           # layer -> recipe key
                   "model.layers.0.mlp.experts": "nvfp4", ...},          # QuantizedExperts too
     "kept":      {"lm_head": "output head (named 'lm_head')",
                   "model.layers.0.mlp.gate": "MoE router ...", ...}}

:func:`conversion_record` builds it from the live model (every ``ms.Linear`` is listed, so two
``convert`` calls with different recipes give two recipe keys; quantized experts are listed
too); :func:`apply_record` converts a freshly built model of the same architecture exactly as
listed (no heuristics), and fails loudly when a listed layer is missing or is not a Linear /
Conv1D / fused-experts module.

Where it is written: ``convert`` stores it as ``model.config.microscale`` when the model has a
Hugging Face style config (an object with ``to_json_string``), so ``save_pretrained`` puts it
in ``config.json`` and :func:`microscale.integrations.transformers.from_pretrained` finds it.
For bare safetensors files pass :func:`safetensors_metadata` as ``metadata=``.
Each converted layer's ``_extra_state`` also carries its own recipe, so even a bare state dict
says which layers were quantized and how.
"""

from __future__ import annotations

import json

from torch import nn

from ..recipe import Recipe
from .linear import Linear
from .transposed import TransposedLinear, is_conv1d

__all__ = ["RECORD_KEY", "conversion_record", "apply_record", "stamp", "read_stamp",
           "safetensors_metadata"]

RECORD_KEY = "microscale"
_VERSION = 1


def _recipe_key(recipe: Recipe, recipes: dict[str, dict]) -> str:
    """A key for ``recipe`` in ``recipes``: its name, suffixed when a different recipe has it."""
    wanted, i = recipe.to_dict(), 1
    key = recipe.name
    while key in recipes and recipes[key] != wanted:
        i += 1
        key = f"{recipe.name}#{i}"
    recipes[key] = wanted
    return key


def conversion_record(model: nn.Module, kept: dict[str, str] | None = None) -> dict:
    """The record of ``model`` as it is now; ``kept`` is the name -> reason of what stays high
    precision (a :class:`~microscale.ConversionReport`'s ``kept``)."""
    from .. import __version__
    from .experts import _GroupedBase

    recipes: dict[str, dict] = {}
    converted = {name: _recipe_key(mod.recipe, recipes) for name, mod in model.named_modules()
                 if isinstance(mod, (Linear, _GroupedBase))}
    kept = {k: v for k, v in (kept or {}).items() if k not in converted}
    return {"version": _VERSION, "microscale_version": __version__, "recipes": recipes,
            "converted": converted, "kept": kept}


def _check(record) -> dict:
    if not isinstance(record, dict) or "converted" not in record or "recipes" not in record:
        raise ValueError("not a microscale conversion record (expected a dict with 'recipes' "
                         f"and 'converted'), got {type(record).__name__}")
    if record.get("version", _VERSION) > _VERSION:
        raise ValueError(f"conversion record version {record['version']} is newer than this "
                         f"microscale understands ({_VERSION}); upgrade microscale")
    unknown = set(record["converted"].values()) - set(record["recipes"])
    if unknown:
        raise ValueError(f"conversion record names recipes it does not define: {sorted(unknown)}")
    return record


def _converted_layer(model: nn.Module, name: str, recipe: Recipe) -> nn.Module | None:
    """``name``'s module converted with ``recipe`` (None if it already is a microscale layer):
    a Linear or Conv1D, or fused experts (``QuantizedExperts``)."""
    from .experts import QuantizedExperts, _GroupedBase, expert_layout

    try:
        mod = model.get_submodule(name)
    except AttributeError:
        raise ValueError(f"the conversion record lists {name!r}, which this model does not "
                         "have (a different architecture or config?)") from None
    if isinstance(mod, (Linear, _GroupedBase)):
        mod.recipe = recipe
        return None
    if isinstance(mod, nn.Linear):
        return Linear.from_linear(mod, recipe, name=name)
    if is_conv1d(mod):
        return TransposedLinear.from_conv1d(mod, recipe, name=name)
    if expert_layout(mod) is None:
        return QuantizedExperts.from_experts(mod, recipe, name=name)
    raise ValueError(f"the conversion record lists {name!r} as converted, but in this model it "
                     f"is a {type(mod).__name__}, not a Linear, Conv1D or fused experts")


def apply_record(model: nn.Module, record: dict) -> None:
    """Convert ``model`` (same architecture) exactly as ``record`` lists: the named layers with
    their recipes, nothing else (no head or block heuristics). All-or-nothing, like convert."""
    record = _check(record)
    recipes = {key: Recipe.from_dict(d) for key, d in record["recipes"].items()}
    swaps = [(name, _converted_layer(model, name, recipes[key]))
             for name, key in record["converted"].items()]
    for name, new in swaps:
        if new is not None:
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent), leaf, new)
    stamp(model, record)


def stamp(model: nn.Module, record: dict) -> bool:
    """Store ``record`` as ``model.config.microscale`` if the model has a HF-style config."""
    config = getattr(model, "config", None)
    if config is None or not callable(getattr(config, "to_json_string", None)):
        return False
    setattr(config, RECORD_KEY, record)
    return True


def read_stamp(model: nn.Module) -> dict | None:
    """The record stored on ``model.config`` by :func:`stamp`, or None."""
    return getattr(getattr(model, "config", None), RECORD_KEY, None)


def safetensors_metadata(model: nn.Module) -> dict[str, str]:
    """``{"microscale": <record JSON>}`` for ``safetensors.torch.save_model(..., metadata=)``."""
    stamped = read_stamp(model)
    record = conversion_record(model, stamped.get("kept") if stamped else None)
    return {RECORD_KEY: json.dumps(record, sort_keys=True)}
