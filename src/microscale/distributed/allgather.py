"""FSDP2 all-gathers the weight in the recipe's fprop weight format, not in fp32.

What moves
==========
FSDP2 (``fully_shard``) keeps 1/N of every weight W ``[out, in]`` per rank (rows, dim 0) and
all-gathers the full W before the layer runs (forward, and again before backward). The layer
then quantizes W anyway, so microscale quantizes each *shard* before the all-gather and moves
codes and scales instead of fp32 (or bf16) values::

    rank r:  W_r [out/N, in] fp32  --quantize-->  codes + scales of W_r   (fprop weight format)
    all-gather (dim 0)          -->  codes + scales of W                  (what fprop reads)

Bytes per element moved, against bf16's 2: NVFP4 16×16 0.504 (E2M1 nibbles + one E4M3 byte
per 16×16 tile), MXFP8 1.03, FP8 128×128 1.0002, FP8 1×128 1.03, MXFP4 0.53
(:func:`all_gather_bytes` counts them for a model).

Bit-identical to one process
============================
Quantizing shards gives the codes of the whole weight only if nothing a scale depends on
crosses a shard boundary:

* per-tensor values are agreed first: every rank's shard amax is all-reduced (MAX), so NVFP4's
  global amax and tensorwise FP8's scale are those of the full W;
* a block never straddles two shards: a shard's rows must be a multiple of the tile height
  (16 for NVFP4 16×16, 128 for FP8 128×128), and FSDP2 must shard evenly (``out`` divisible by
  N; FSDP2 pads uneven shards, and its extension hook requires the padded shape).

So ``out_features`` must be a multiple of ``N · shard_rows_multiple(recipe)``
(:func:`check_shards` raises naming the layer otherwise).

The dgrad view
==============
dgrad reads Wᵀ quantized along ``out``. For square tiles (NVFP4 16×16, FP8 128×128) and
tensorwise FP8 that is exactly the transpose of the gathered codes and scales (SPEC §3, §8),
computed after the gather. For 1-D blocks (MXFP8/MXFP4 1×32, NVFP4 1×16, FP8 1×128) the blocks
of Wᵀ run along ``out``, across rows of W: each rank also quantizes its shard's columns (rows of
``W_rᵀ``, whose blocks then need whole shards too) and that view is gathered alongside.

Mechanism
=========
:class:`QuantizedShardWeight` wraps a layer's sharded fp32 master (optimizer, state dicts and
checkpoints see plain fp32 values) and implements FSDP2's ``fsdp_pre_all_gather`` /
``fsdp_post_all_gather``; the unsharded parameter FSDP2 builds is a :class:`GatheredWeight`,
which holds the gathered views. ``ms.Linear`` feeds them to fprop and dgrad without
re-quantizing. Call :func:`enable_quantized_all_gather` before ``fully_shard``.
Compile: :class:`GatheredWeight` is a traceable wrapper subclass, so blocks compiled with
``torch.compile(fullgraph=True)`` read each step's gather as graph inputs and return the
weight gradient to FSDP2 (tested against eager with ``aot_eager`` on CPU; the harness compiles
blocks with Inductor on GPUs).
Limits: no delayed-scaling or RHT weights; the precision switches (bf16 fprop, ``high_precision``) need
the fp32 weight and raise; at least 2 ranks (with one, FSDP2 skips the collective and passes
only the first all-gather input to the hook).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils._pytree import tree_map_only

from ..ops import quantize_views
from ..recipe import Recipe, Rounding
from ..tensor import QFormat, QuantizedTensor
from .gathered import GatheredWeight, gathered_views, is_gathered
from .reduce import all_gather_rows, global_amax

__all__ = ["GatheredWeight", "QuantizedShardWeight", "all_gather_bytes", "check_recipe",
           "check_shards", "enable_quantized_all_gather", "gathered_views", "is_gathered",
           "plain_state_dict",
           "quantized_all_gather", "shard_rows_multiple"]

aten = torch.ops.aten


# ============================================================================ what is gathered
def check_recipe(recipe: Recipe, name: str = "layer") -> None:
    """The recipe's weight views can be gathered quantized (else a ValueError naming why)."""
    f, d = recipe.fprop, recipe.dgrad
    if not (f.quantized and d.quantized):
        raise ValueError(f"{name}: quantized all-gather needs quantized fprop and dgrad "
                         f"(recipe {recipe.name!r}); keep the fp32 all-gather for this layer")
    for role, op in (("fprop", f.b), ("dgrad", d.b)):
        if op.delayed or op.rht or op.rounding != Rounding.RNE:
            raise ValueError(f"{name}: quantized all-gather supports RNE weights without RHT "
                             f"or delayed scaling; {role} weight is {op}")


def _transposable(recipe: Recipe) -> bool:
    """dgrad's Wᵀ view is the exact transpose of fprop's W view (no second view to gather)."""
    f, d = recipe.fprop.b, recipe.dgrad.b
    return f.format == d.format and f.quantize_kwargs() == d.quantize_kwargs() and \
        (f.square_tiles or f.format == QFormat.FP8_TENSOR)


def shard_rows_multiple(recipe: str | Recipe) -> int:
    """Rows of W a shard must be a multiple of so that no block straddles two shards."""
    recipe = Recipe.parse(recipe)
    f, d = recipe.fprop.b, recipe.dgrad.b
    need = f.block[0] if f.format != QFormat.FP8_TENSOR else 1
    if not _transposable(recipe):          # Wᵀ blocks run along out: whole blocks per shard
        need = math.lcm(need, d.block_size, 2 if d.format.is_fp4 else 1)
    return need


def check_shards(recipe: Recipe, out_features: int, world: int, name: str = "layer") -> int:
    """Rows per shard, or a ValueError stating the shard-boundary rule."""
    if world < 2:       # FSDP2 (torch 2.13) hands post_all_gather only the first input then
        raise ValueError(f"{name}: quantized all-gather needs at least 2 ranks (one process "
                         "gathers nothing; keep the fp32 all-gather)")
    need = shard_rows_multiple(recipe)
    if out_features % (world * need):
        raise ValueError(
            f"{name}: quantized all-gather of a [{out_features}, in] weight over {world} ranks "
            f"needs out_features divisible by {world} x {need} (even FSDP2 shards of whole "
            f"{need}-row blocks for recipe {recipe.name!r}); use another world size, pad the "
            "layer, or keep the fp32 all-gather for it")
    return out_features // world


# ============================================================================ shard -> bytes -> views
def _as_rows_u8(t: torch.Tensor) -> torch.Tensor:
    """A 2-D tensor as uint8 rows (what FSDP2 concatenates along dim 0)."""
    return t.contiguous().view(torch.uint8)


def quantize_shard(w_shard: torch.Tensor, recipe: Recipe, group_name: str):
    """This rank's all-gather inputs (uint8, 2-D, dim 0 = the shard's rows) and the metadata
    :func:`assemble` needs. ``group_name`` "" = no agreement (one process, or counting bytes)."""
    f, d = recipe.fprop.b, recipe.dgrad.b
    amax = global_amax(w_shard, group_name) if group_name else \
        w_shard.detach().abs().amax().float()
    views = []
    for op in (f, None if _transposable(recipe) else d):
        if op is None:
            views.append(None)
            continue
        opts = op.quantize_kwargs() | {"check_finite": False}
        if op.format in (QFormat.NVFP4, QFormat.FP8_TENSOR):
            opts["amax"] = amax        # the full weight's amax: its scale rule in the quantizer
        views.append((op.format, opts))
    q_row, q_col = quantize_views(w_shard.detach(), views[0], views[1], recipe.backend)
    inputs = [_as_rows_u8(q_row.data)]
    if f.format != QFormat.FP8_TENSOR:          # tensorwise: the one scale travels as metadata
        tiles = q_row.scale[:: f.block[0]] if f.format == QFormat.NVFP4 else q_row.scale
        inputs.append(_as_rows_u8(tiles))       # NVFP4 16×16: one byte per tile, not per row
    if q_col is not None:                        # rows of W_rᵀ's view, transposed back
        inputs += [_as_rows_u8(q_col.data.t()), _as_rows_u8(q_col.scale.t())]
    meta = {"recipe": recipe, "amax": amax, "row": _meta_of(q_row),
            "col": None if q_col is None else _meta_of(q_col),
            "tensor_scale": q_row.scale if f.format == QFormat.FP8_TENSOR else None}
    return inputs, meta


def _meta_of(q: QuantizedTensor) -> dict:
    return {"fmt": q.fmt, "block": q.block, "extra": q.extra, "data": q.data.dtype,
            "scale": q.scale.dtype}


def assemble(outputs, meta: dict, shape: torch.Size):
    """The gathered uint8 rows -> (W view for fprop, Wᵀ view for dgrad) as QuantizedTensors."""
    out, cols = shape
    row, amax = meta["row"], meta["amax"]
    data = outputs[0].view(row["data"])
    if meta["tensor_scale"] is not None:
        scale = meta["tensor_scale"]
    else:
        scale = outputs[1].view(row["scale"])
        if row["fmt"] == QFormat.NVFP4 and row["block"][0] > 1:
            scale = scale.repeat_interleave(row["block"][0], dim=0)
    q_row = QuantizedTensor(fmt=row["fmt"], data=data, scale=scale, amax=amax,
                            shape=torch.Size((out, cols)), orig_dtype=torch.float32,
                            block=(out, cols) if row["fmt"] == QFormat.FP8_TENSOR else row["block"],
                            extra=row["extra"])
    col = meta["col"]
    if col is None:
        return q_row, _transpose(q_row)
    q_col = QuantizedTensor(fmt=col["fmt"], data=outputs[2].view(col["data"]).t().contiguous(),
                            scale=outputs[3].view(col["scale"]).t().contiguous(), amax=amax,
                            shape=torch.Size((cols, out)), orig_dtype=torch.float32,
                            block=col["block"], extra=col["extra"])
    return q_row, q_col


def _transpose(q: QuantizedTensor) -> QuantizedTensor:
    if q.fmt == QFormat.FP8_TENSOR:             # one scale: the transposed codes are exact
        rows, cols = q.shape
        return QuantizedTensor(fmt=q.fmt, data=q.data.t().contiguous(), scale=q.scale,
                               amax=q.amax, shape=torch.Size((cols, rows)),
                               orig_dtype=q.orig_dtype, block=(cols, rows), extra=q.extra)
    return q.t()


def quantized_all_gather(w_shard: torch.Tensor, recipe: str | Recipe, group=None):
    """``(W view, Wᵀ view)`` of the full weight from this rank's dim-0 shard, gathered over
    ``group`` (default WORLD) in the fprop weight format: what FSDP2's hooks do, as a call."""
    import torch.distributed as dist
    recipe = Recipe.parse(recipe)
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    rows = w_shard.shape[0]
    check_recipe(recipe)
    check_shards(recipe, rows * world, world)
    inputs, meta = quantize_shard(w_shard, recipe, group.group_name)
    outputs = [all_gather_rows(t, world, group.group_name) for t in inputs]
    return assemble(outputs, meta, torch.Size((rows * world, w_shard.shape[1])))


def all_gather_bytes(model: nn.Module, world: int = 2) -> dict:
    """Bytes one all-gather of each quantized ``ms.Linear`` weight moves (the full weight),
    against bf16 and fp32 ones. FSDP2 gathers twice per step (forward, and backward after
    ``reshard_after_forward``): ``per_step`` counts both."""
    from ..nn.linear import Linear
    layers, totals = {}, {"quantized": 0, "bf16": 0, "fp32": 0}
    for name, m in model.named_modules():
        if not _eligible(m, Linear):
            continue
        check_recipe(m.recipe, name)
        rows = check_shards(m.recipe, m.out_features, world, name)
        meta_w = torch.empty(rows, m.in_features, device="meta")
        inputs, _ = quantize_shard(meta_w, m.recipe, "")
        n = m.out_features * m.in_features
        entry = {"quantized": world * sum(t.numel() for t in inputs), "bf16": 2 * n, "fp32": 4 * n}
        layers[name] = entry
        for k in totals:
            totals[k] += entry[k]
    ratio = totals["quantized"] / totals["bf16"] if totals["bf16"] else float("nan")
    return {"layers": layers, "total": totals, "ratio_vs_bf16": ratio,
            "per_step": {k: 2 * v for k, v in totals.items()}}


def _eligible(m: nn.Module, linear_cls) -> bool:
    """A quantized ``ms.Linear`` that reads its weight as stored (FSDP2's wrapper classes
    subclass it; ``TransposedLinear`` reads ``weight.t()`` and is left alone)."""
    return isinstance(m, linear_cls) and type(m).gemm_weight is linear_cls.gemm_weight and \
        m.precision == "quantized"


# ============================================================================ the FSDP2 hooks
def _unwrap(t):
    return t._tensor


class QuantizedShardWeight(torch.Tensor):
    """A layer's fp32 master (FSDP2's local shard) whose all-gather moves quantized codes.

    Every op runs on the wrapped fp32 tensor; the few FSDP2 uses to build and pad shards keep
    the wrapper (so the hooks stay attached), all others return plain tensors (optimizer state,
    gradients, state dicts)."""

    _PRESERVE = frozenset({aten.detach.default, aten.alias.default, aten.view.default,
                 aten.as_strided.default, aten.slice.Tensor, aten.split.Tensor,
                 aten.split_with_sizes.default, aten.clone.default, aten.copy_.default,
                 aten.new_zeros.default, aten.empty_like.default, aten._to_copy.default,
                 aten.chunk.default})

    @staticmethod
    def __new__(cls, tensor: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            requires_grad=tensor.requires_grad)

    def __init__(self, tensor: torch.Tensor):
        self._tensor = tensor

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        out = func(*tree_map_only(cls, _unwrap, args), **tree_map_only(cls, _unwrap, kwargs or {}))
        if func in cls._PRESERVE:
            return tree_map_only(torch.Tensor, cls, out)
        return out

    def __tensor_flatten__(self):
        return ["_tensor"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return QuantizedShardWeight(inner["_tensor"])

    def __repr__(self):
        return f"QuantizedShardWeight({self._tensor!r})"

    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        if module.precision != "quantized":
            raise RuntimeError(f"{module._label()}: precision {module.precision!r} needs the "
                               "fp32 weight, but its FSDP2 all-gather is quantized; build the "
                               "model without enable_quantized_all_gather to switch precision")
        world = mesh.size()
        check_shards(module.recipe, outer_size[0], world, module._label())
        return quantize_shard(self._tensor, module.recipe, mesh.get_group().group_name)

    def fsdp_post_all_gather(self, outputs, meta, param_dtype, *, out=None):
        q_row, q_col = assemble(outputs, meta, self._outer_shape(outputs, meta))
        if out is not None:
            out.refresh_(q_row, q_col)
            return None
        weight = GatheredWeight(q_row, q_col)
        return weight, weight.owned_tensors(outputs)

    def _outer_shape(self, outputs, meta) -> torch.Size:
        rows = outputs[0].shape[0]
        return torch.Size((rows, self._tensor.shape[1]))


def plain_state_dict(state: dict) -> dict:
    """``state`` with every :class:`QuantizedShardWeight` (bare, or as a DTensor's local shard)
    replaced by the fp32 tensor it wraps, sharing storage: what checkpoints store and load into
    (``torch.load(weights_only=True)`` knows no microscale classes)."""
    from torch.distributed.tensor import DTensor

    def plain(t):
        if isinstance(t, DTensor) and isinstance(t._local_tensor, QuantizedShardWeight):
            return DTensor.from_local(t._local_tensor._tensor, t.device_mesh, t.placements,
                                      run_check=False, shape=t.shape, stride=t.stride())
        return t._tensor if isinstance(t, QuantizedShardWeight) else t
    return {k: plain(v) for k, v in state.items()}


def enable_quantized_all_gather(model: nn.Module, world: int | None = None) -> list[str]:
    """Make FSDP2 gather every eligible ``ms.Linear`` weight quantized (call before
    ``fully_shard``); returns the layers' names. ``world`` checks the shard rule now (else
    the first all-gather checks it)."""
    from ..nn.linear import Linear
    enabled = []
    for name, m in model.named_modules():
        if not _eligible(m, Linear):
            continue
        check_recipe(m.recipe, name)
        if world is not None:
            check_shards(m.recipe, m.out_features, world, name)
        if not isinstance(m.weight.data, QuantizedShardWeight):
            m.weight = nn.Parameter(QuantizedShardWeight(m.weight.data),
                                    requires_grad=m.weight.requires_grad)
        enabled.append(name)
    return enabled
