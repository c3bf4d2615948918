"""Hugging Face round trip: save a converted model with ``save_pretrained``, get it back quantized.

What a converted model's ``save_pretrained`` (or ``Trainer``'s checkpoint) directory holds::

    config.json          the model config plus "microscale": the conversion record
                         (recipes, converted layers, kept layers with reasons; nn/record.py)
    model.safetensors    the fp32 masters under the original keys (a converted GPT-2 Conv1D
                         keeps its [in, out] shape), and per converted layer
                         "<layer>._extra_state": uint8, magic MSQ1 + JSON header (its recipe,
                         precision switches) + fp32 delayed-scaling state (nn/linear.py)

A plain ``AutoModelForCausalLM.from_pretrained(dir)`` reads this as the unconverted architecture
with the trained weights (and lists the ``_extra_state`` keys as unexpected).
:func:`from_pretrained` re-creates the quantized model in one call:

1. ``model_cls.from_pretrained(dir, **kwargs)`` loads the architecture and weights (tied weights,
   shards, the MoE layout conversions of transformers 5, ``device_map``... all Hugging Face's).
   The ``_extra_state`` keys are expected here, so Hugging Face's load report is shown only when
   it has something else to say;
2. the layers named by the checkpoint's ``_extra_state`` keys are converted with the recipe each
   header names (cross-checked against the record in ``config.json``);
3. each converted layer's master weight and bias are read again from the checkpoint files, so
   they are the exact fp32 values saved even when ``dtype=`` rounded the rest of the model, and
   its ``_extra_state`` restores the precision switches and delayed-scaling histories.

Quantized MoE experts (``QuantizedExperts``) round-trip too. transformers 5 writes fused experts
back in the checkpoint's own layout (one tensor per expert and projection, under the model
type's legacy names, e.g. Mixtral's ``block_sparse_moe.experts.3.w1.weight``) and renames the
keys under them on load, the experts' ``_extra_state`` included. Its load report names those
keys as the model calls them, so each saved ``_extra_state`` is matched to its module by the
numbers in its key (the layer index) and the module name; an ambiguous match is refused. The
expert masters come from transformers' own merge of the per-expert tensors, so they are exact
only when it loads them in fp32: with another ``dtype`` (and quantized experts) the load is
refused rather than rounding them.

So logits after the round trip are bit-identical to the saved model's (same inputs, same RNG
state for stochastic rounding, which only backward uses). Local directories only: download a
Hub repository first (``huggingface_hub.snapshot_download``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from ..nn.experts import _GroupedBase, decode_grouped_header
from ..nn.experts import is_grouped_state as _is_grouped
from ..nn.linear import Linear, _decode_state
from ..nn.record import RECORD_KEY, _recipe_key, apply_record
from ..recipe import Recipe

__all__ = ["from_pretrained", "checkpoint_files", "read_extra_states"]

log = logging.getLogger(__name__)

_EXTRA = "._extra_state"


def _require_transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError("this needs Hugging Face transformers: pip install transformers "
                          "(or microscale[test])") from None
    return transformers


def checkpoint_files(path: str | os.PathLike) -> list[Path]:
    """The safetensors files of a ``save_pretrained`` directory (one file, or the shards)."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path} is not a local directory; download a Hub repository first "
                         "(huggingface_hub.snapshot_download) and pass its path")
    index = path / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [path / s for s in shards]
    single = path / "model.safetensors"
    if single.is_file():
        return [single]
    raise ValueError(f"{path} holds no model.safetensors (or its index); save with "
                     "save_pretrained (safetensors is its default)")


def read_extra_states(files: list[Path]) -> dict[str, torch.Tensor]:
    """``{layer name: _extra_state tensor}`` for every microscale layer in ``files``."""
    from safetensors import safe_open

    states = {}
    for f in files:
        with safe_open(str(f), "pt") as handle:
            for key in handle.keys():
                if key.endswith(_EXTRA):
                    states[key[: -len(_EXTRA)]] = handle.get_tensor(key)
    return states


def _state_recipe(state: torch.Tensor, label: str) -> Recipe:
    """The recipe in an ``_extra_state`` header (an ``ms.Linear``'s or a grouped layer's)."""
    decode = decode_grouped_header if _is_grouped(state) else _decode_state
    return Recipe.from_json(decode(state, label)[0]["recipe"])


def _record_from_states(states: dict[str, torch.Tensor], config_record: dict | None) -> dict:
    """The conversion record the ``_extra_state`` headers describe (they win over config.json,
    which is written at convert time; a recipe set later lives in the headers)."""
    recipes, converted = {}, {}
    for name, state in states.items():
        converted[name] = _recipe_key(_state_recipe(state, f"{name}{_EXTRA}"), recipes)
    if config_record is not None and set(config_record.get("converted", {})) != set(converted):
        only_cfg = sorted(set(config_record["converted"]) - set(converted))
        only_ckpt = sorted(set(converted) - set(config_record["converted"]))
        warnings.warn("config.json's microscale record and the checkpoint's layers disagree "
                      f"(only in config.json: {only_cfg[:3]}, only in the weights: "
                      f"{only_ckpt[:3]}); following the weights. The record is written at "
                      "convert time: was the config object shared with another converted "
                      "model?", UserWarning, stacklevel=3)
        config_record = {k: v for k, v in config_record.items() if k != "kept"}
    kept = (config_record or {}).get("kept", {})
    return {"version": 1, "recipes": recipes, "converted": converted, "kept": kept}


class _HoldLoadReport(logging.Filter):
    """Holds back Hugging Face's load report (re-emitted when it says more than our keys)."""

    def __init__(self):
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in str(record.msg):
            self.held.append(record)
            return False
        return True


@contextlib.contextmanager
def _held_load_report():
    logger = logging.getLogger("transformers.modeling_utils")
    hold = _HoldLoadReport()
    logger.addFilter(hold)
    try:
        yield hold
    finally:
        logger.removeFilter(hold)


def _check_loading(info: dict, expected_unexpected: set[str], hold: _HoldLoadReport) -> None:
    others = set(info.get("unexpected_keys", ())) - expected_unexpected
    if others or info.get("missing_keys") or info.get("mismatched_keys"):
        logger = logging.getLogger("transformers.modeling_utils")
        for record in hold.held:
            logger.handle(record)


def _has(model: nn.Module, name: str) -> bool:
    try:
        model.get_submodule(name)
    except AttributeError:
        return False
    return True


def _model_names(model: nn.Module, saved: list[str], unexpected) -> dict[str, str]:
    """``{saved layer name: the model's name for it}``. transformers renames some checkpoint
    keys on load (legacy MoE names); its load report lists our ``_extra_state`` keys under the
    model's names. Names the model has pair with themselves, the rest by (the numbers in the
    name, its last part), which must be unique on both sides."""
    loaded = [k[: -len(_EXTRA)] for k in unexpected if k.endswith(_EXTRA)]
    names = {n: n for n in saved if n in loaded or _has(model, n)}
    rest_saved = [n for n in saved if n not in names]
    rest_loaded = [n for n in loaded if n not in names.values()]

    def signature(name: str) -> tuple:
        parts = name.split(".")
        return tuple(p for p in parts if p.isdigit()), parts[-1]

    by_sig = {}
    for n in rest_loaded:
        by_sig.setdefault(signature(n), []).append(n)
    for n in rest_saved:
        match = by_sig.get(signature(n), [])
        if len(match) != 1 or sum(signature(m) == signature(n) for m in rest_saved) != 1:
            raise ValueError(f"cannot tell which layer of the loaded model the checkpoint's "
                             f"{n}{_EXTRA} belongs to (transformers renamed it on load; "
                             f"candidates: {match or rest_loaded[:4]})")
        names[n] = match[0]
    return names


def _check_expert_masters(model: nn.Module, names: list[str]) -> None:
    """Fused experts as transformers loaded them must be fp32: their masters are not re-read."""
    for name in names:
        mod = model.get_submodule(name)
        dtypes = {p.dtype for p in mod.parameters(recurse=False)}
        if dtypes - {torch.float32}:
            raise ValueError(f"{name}: quantized experts need their fp32 masters, but this load "
                             f"gave {sorted(str(d) for d in dtypes)}; load with "
                             "dtype=torch.float32 (microscale layers keep fp32 masters through "
                             "a later model.to(dtype))")


def _load_layer_tensors(model: nn.Module, files: list[Path], states: dict,
                        names: dict[str, str]) -> None:
    """Exact fp32 masters of every converted ``ms.Linear`` from the files (under their saved
    names), and every converted layer's ``_extra_state``."""
    from safetensors import safe_open

    linear = [n for n, st in states.items() if not _is_grouped(st)]
    wanted = {f"{name}.{p}": (names[name], p) for name in linear for p in ("weight", "bias")}
    found = set()
    for f in files:
        with safe_open(str(f), "pt") as handle:
            for key in set(handle.keys()) & set(wanted):
                name, p = wanted[key]
                with torch.no_grad():
                    getattr(model.get_submodule(name), p).copy_(handle.get_tensor(key))
                found.add(key)
    for saved, state in states.items():
        if saved in linear and f"{saved}.weight" not in found:
            raise ValueError(f"checkpoint has {saved}{_EXTRA} but no {saved}.weight")
        model.get_submodule(names[saved]).set_extra_state(state)


def from_pretrained(model_cls, path: str | os.PathLike, **kwargs):
    """Load a converted model saved with ``save_pretrained`` back as the same quantized model.

    Args:
        model_cls: a transformers model class or Auto class (``AutoModelForCausalLM``,
            ``LlamaForCausalLM``...); its ``from_pretrained`` builds the architecture.
        path: the local directory ``save_pretrained`` (or ``Trainer``) wrote.
        **kwargs: passed to ``model_cls.from_pretrained`` (``dtype``, ``device_map``...); the
            converted layers' masters stay the saved fp32 values whatever ``dtype`` says.
    """
    _require_transformers()
    files = checkpoint_files(path)
    config = json.loads((Path(path) / "config.json").read_text())
    config_record = config.get(RECORD_KEY)
    if isinstance(config_record, dict) and "export" in config_record:
        raise ValueError(f"{path} is a serving export ({config_record['export'].get('format')}), "
                         "not a training checkpoint: load it with transformers' own "
                         "from_pretrained")
    states = read_extra_states(files)
    if not states:
        raise ValueError(f"{path} holds no microscale layers (no '*{_EXTRA}' tensors): was it "
                         "saved from a converted model?")
    want_info = kwargs.pop("output_loading_info", False)
    with _held_load_report() as hold:
        model, info = model_cls.from_pretrained(path, output_loading_info=True, **kwargs)
    names = _model_names(model, list(states), info.get("unexpected_keys", ()))
    _check_loading(info, {f"{n}{_EXTRA}" for n in names.values()}, hold)
    _check_expert_masters(model, [names[n] for n, st in states.items() if _is_grouped(st)])
    record = _record_from_states({names[n]: st for n, st in states.items()}, config_record)
    apply_record(model, record)                      # converts, checks, stamps the config
    _load_layer_tensors(model, files, states, names)
    n = sum(isinstance(m, (Linear, _GroupedBase)) for m in model.modules())
    log.info("microscale: %d layers restored quantized from %s", n, path)
    return (model, info) if want_info else model
