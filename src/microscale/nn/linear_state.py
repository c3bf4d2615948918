"""``ms.Linear``'s state helpers: delayed-scaling roles and buffers, seeds from a layer-owned
generator, the serialized ``_extra_state`` and the recipe's size check.

A layer keeps one amax history and scale per delayed-scaling GEMM operand role
(``_delayed_roles``) as buffers named by ``_buffer_name``; a layer that owns a ``generator``
draws its SR seeds through ``_seeds_from`` (outside the compiled graph).
``Linear.get_extra_state`` writes ``_MAGIC + len(header) + header JSON + fp32 payload``;
``_decode_state`` reads it back (or the older dict form) as ``(header, {role: (history,
scale)})`` and says what is wrong with a truncated or foreign one. ``_check_dims`` refuses a
recipe whose blocks cannot tile the layer's feature sizes. What the state is and how it loads:
the "State" section of :mod:`microscale.nn.linear`.
"""

from __future__ import annotations

import json

import torch

from ..quant.common import draw_seed
from ..recipe import Recipe
from .plan import N_SEEDS, ROLES

_MAGIC = b"MSQ1"


def _delayed_roles(recipe: Recipe) -> dict[str, object]:
    """Role -> OperandConfig for the roles that use delayed scaling."""
    out = {}
    for role in ROLES:
        gemm, operand = role.split(".")
        cfg = getattr(recipe, gemm)
        op = getattr(cfg, operand)
        if cfg.quantized and op.delayed:
            out[role] = op
    return out


def _buffer_name(role: str, what: str) -> str:
    return f"delayed_{role.replace('.', '_')}_{what}"


@torch.compiler.disable
def _seeds_from(generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Seeds from a layer-owned generator (dynamo cannot trace a Generator: a graph break)."""
    return torch.cat([draw_seed(generator, device) for _ in range(N_SEEDS)]).to(torch.int32)


def _decode_state(state, label: str) -> tuple[dict, dict]:
    """``_extra_state`` (the uint8 tensor, or the older dict) -> (header, {role: (hist, scale)})."""
    if isinstance(state, dict):                      # the dict form written before the tensor
        values = {role: (s["amax_history"].float(), s["scale"].float())
                  for role, s in state.get("delayed", {}).items()}
        return {k: state[k] for k in state if k != "delayed"}, values
    if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.dim() == 1
            and bytes(state[:4].tolist()) == _MAGIC):
        raise ValueError(f"{label}: _extra_state is not a microscale layer state "
                         f"(got {type(state).__name__}); was the checkpoint written by another "
                         "library or truncated?")
    try:
        return _parse_state(state.cpu(), label)
    except (KeyError, TypeError, RuntimeError, ValueError) as err:  # a truncated or edited file
        raise ValueError(f"{label}: _extra_state is damaged ({type(err).__name__}: {err})") \
            from None


def _parse_state(raw: torch.Tensor, label: str) -> tuple[dict, dict]:
    n = int.from_bytes(bytes(raw[4:8].tolist()), "little")
    header = json.loads(bytes(raw[8:8 + n].tolist()).decode())
    body = raw[8 + n:].clone().view(torch.float32)
    recipe = Recipe.from_json(header["recipe"])
    values, offset = {}, 0
    for role in header.get("delayed", []):
        length = _delayed_roles(recipe)[role].history_len
        values[role] = (body[offset:offset + length], body[offset + length:offset + length + 1])
        offset += length + 1
    if offset != body.numel():
        raise ValueError(f"{label}: _extra_state payload has {body.numel()} values, the header "
                         f"describes {offset}")
    return header, values


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
