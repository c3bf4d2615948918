"""What :func:`checkpoint.load_checkpoint` checks before it applies anything.

Each check reads a part of the checkpoint (the JSON and its keys, the tensors file, the model
and optimizer state dicts, the layers' generators, the global RNG states) and raises a
``ValueError`` naming the entry, or :class:`checkpoint.CorruptCheckpointError` for a missing
or unreadable tensors file; none of them changes any state. Generator and RNG states are tried
on scratch generators.
"""

from __future__ import annotations

import binascii
import json
import random
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .checkpoint import CorruptCheckpointError, _generators, _unb64, _unpack

_ERRORS = (KeyError, IndexError, TypeError, ValueError, RuntimeError, OverflowError)


def _read(meta_path: Path, need_optimizer: bool) -> tuple[dict, dict]:
    """The JSON (with the keys a load needs) and the tensors file it names."""
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"checkpoint {meta_path}: not valid JSON ({err})") from None
    need = ["step", "weights", "model", "rng"] + (["optimizer"] if need_optimizer else [])
    missing = [k for k in need if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ValueError(f"checkpoint {meta_path}: missing {', '.join(missing)}")
    weights = meta_path.with_name(str(meta["weights"]))
    if not weights.is_file():
        raise CorruptCheckpointError(f"checkpoint {meta_path}: tensors file {weights} is missing")
    try:
        tensors = load_file(weights)
    except (SafetensorError, OSError) as err:
        raise CorruptCheckpointError(f"checkpoint {weights}: unreadable tensors file ({err})") \
            from None
    return meta, tensors


def _unpack_checked(obj, tensors: dict, where: str, what: str):
    try:
        return _unpack(obj, tensors)
    except _ERRORS as err:
        raise ValueError(f"{where}: the {what} state is damaged ({type(err).__name__}: {err})") \
            from None


def _check_model_state(model: torch.nn.Module, state, where: str) -> None:
    """Keys, shapes and dtypes as ``model.state_dict()``; each ``_extra_state`` decodable."""
    if not isinstance(state, dict):
        raise ValueError(f"{where}: the model state is not a dict")
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{where}: model keys do not match (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    for key, want in expected.items():
        got = state[key]
        if key.endswith("_extra_state"):
            owner = model.get_submodule(key.rpartition(".")[0])
            if hasattr(owner, "check_extra_state"):
                try:
                    owner.check_extra_state(got)
                except ValueError as err:
                    raise ValueError(f"{where}: {err}") from None
        elif isinstance(want, torch.Tensor) and not _fits(got, want):
            desc = f"{got.dtype} {tuple(got.shape)}" if isinstance(got, torch.Tensor) else \
                type(got).__name__
            raise ValueError(f"{where}: {key} is {desc}, the model has {want.dtype} "
                             f"{tuple(want.shape)}")


def _fits(got, want: torch.Tensor) -> bool:
    """Same shape, and the same dtype or both floating point (``copy_`` converts those)."""
    return isinstance(got, torch.Tensor) and got.shape == want.shape and (
        got.dtype == want.dtype or (got.is_floating_point() and want.is_floating_point()))


def _check_optimizer_state(optimizer: torch.optim.Optimizer, state, where: str) -> None:
    """The group structure ``Optimizer.load_state_dict`` checks, before the model is touched."""
    sizes = [len(g["params"]) for g in optimizer.param_groups]
    try:
        saved = state["param_groups"]
        ok = [len(g["params"]) for g in saved] == sizes
        ok = ok and set(state["state"]) <= {i for g in saved for i in g["params"]}
    except _ERRORS as err:
        raise ValueError(f"{where}: the optimizer state is damaged ({err})") from None
    if not ok:
        raise ValueError(f"{where}: the optimizer state does not fit this optimizer "
                         f"(parameter groups of sizes {sizes})")


def _checked_generator_states(model, tensors: dict, where: str) -> list:
    """``[(generator, state)]`` for the layer generators the file has, each state first tried
    on a scratch generator of the same device."""
    out = []
    for name, gen in _generators(model).items():
        state = tensors.get(f"gen.{name}")
        if state is None:
            continue
        try:
            torch.Generator(device=gen.device).set_state(state)
        except _ERRORS as err:
            raise ValueError(f"{where}: generator state gen.{name} is damaged ({err})") from None
        out.append((gen, state))
    return out


def _check_rng_state(state, where: str) -> None:
    """Apply each global RNG state to a scratch generator: torch CPU (and CUDA), numpy, python."""
    try:
        torch.Generator().set_state(_unb64(state["torch_cpu"]))
        name, keys, pos, has_gauss, cached = state["numpy"]
        np.random.RandomState().set_state((name, np.asarray(keys, dtype=np.uint32), pos,
                                           has_gauss, cached))
        version, internal, gauss_next = state["python"]
        random.Random().setstate((version, tuple(internal), gauss_next))
        if "torch_cuda" in state and torch.cuda.is_available():
            for s in state["torch_cuda"]:
                torch.Generator(device="cuda").set_state(_unb64(s))
    except (*_ERRORS, binascii.Error) as err:
        raise ValueError(f"{where}: the RNG state is damaged ({type(err).__name__}: {err})") \
            from None
