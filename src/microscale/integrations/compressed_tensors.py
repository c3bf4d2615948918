"""The ``"compressed-tensors"`` export: each layer's fprop weight in the packed serving layouts.

compressed-tensors is the checkpoint format of llm-compressor; vLLM, SGLang and transformers
load it (``quantization_config.quant_method = "compressed-tensors"`` in ``config.json``). A
quantized linear layer stores its weight as the codes and scales of one *weight-only scheme*.
What training quantized for the forward GEMM (the recipe's ``fprop.b`` operand, SPEC §9) maps
onto those schemes without any re-rounding, because the layouts coincide::

    recipe fprop.b           compressed-tensors format   tensors of <layer>
    -----------------------  --------------------------  --------------------------------------
    nvfp4 1×16 or 16×16      nvfp4-pack-quantized        weight_packed    uint8 [out, in/2]
                             tensor_group, group 16      weight_scale     e4m3  [out, in/16]
                                                         weight_global_scale fp32 [1]
    mxfp4 1×32               mxfp4-pack-quantized        weight_packed    uint8 [out, in/2]
                                                         weight_scale     uint8 [out, in/32] (E8M0)
    mxfp8_e4m3 1×32          mxfp8-quantized             weight           e4m3  [out, in]
                                                         weight_scale     uint8 [out, in/32] (E8M0)
    fp8_block 128×128/1×128  naive-quantized, block/     weight           e4m3  [out, in]
                             group                       weight_scale     fp32  [out/128, in/128]
    fp8_tensor e4m3          naive-quantized, tensor     weight           e4m3  [out, in]
                                                         weight_scale     fp32  [1]

(``naive-quantized`` is the name compressed-tensors itself gives a weight-only FP8 scheme; with
quantized activations the same layout is called ``float-quantized``.)

Both sides pack two E2M1 codes per byte with the even element in the low nibble, and a 16×16
tile's scale repeated on its 16 rows *is* a group-16 scale tensor. The one trap: NVFP4's
``weight_global_scale`` is the **encode** scale ``S_enc = 448·6 / amax`` (SPEC §2), the value
the loaders divide the block scales by, not its reciprocal ``S_dec``. compressed-tensors' own
decompressor then gives back exactly ``q.dequantize()`` (tested for every row of the table).

Not expressible, so :func:`pack_weight` raises a ``ValueError`` naming the reason: E5M2 weights
(MXFP8 E5M2, FP8 with ``fp8_dtype="e5m2"``), an RHT on the fprop weight (the stored values would
live in the rotated domain), and Hugging Face ``Conv1D`` layers (GPT-2: the loaders quantize
``nn.Linear`` modules only). Activations are left dynamic / unquantized (W4A16-style): training
keeps no static input scales, which NVFP4 activation quantization in these engines needs.
Stochastic rounding does not apply to an exported weight; it is quantized with RNE, and a
delayed-scaling FP8 weight with the current amax (what current scaling would use). The layers'
precision switches (``high_precision``, ``hp_fprop``) do not change what is exported: a
converted layer always exports its recipe's fprop weight.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..nn.linear import Linear
from ..nn.record import RECORD_KEY
from ..nn.transposed import TransposedLinear
from ..quant.nvfp4 import nvfp4_global_scales
from ..quantize import quantize
from ..recipe import OperandConfig
from ..tensor import QFormat, QuantizedTensor

__all__ = ["PackedWeight", "pack_weight", "write_compressed_tensors"]


@dataclass
class PackedWeight:
    """One layer's weight in a compressed-tensors format: tensors by local name, the scheme's
    ``weights`` arguments, the format name, and the microscale tensor they came from."""

    format: str
    args: dict
    tensors: dict[str, torch.Tensor]
    q: QuantizedTensor


def _args(num_bits: int, strategy: str, group_size=None, scale_dtype=None, block=None) -> dict:
    args = {"num_bits": num_bits, "type": "float", "symmetric": True, "group_size": group_size,
            "strategy": strategy, "dynamic": False}
    if block is not None:
        args["block_structure"] = list(block)
    if scale_dtype is not None:
        args["scale_dtype"] = scale_dtype
    return args


def _check_expressible(op: OperandConfig) -> None:
    if not op.quantized:
        raise ValueError("the fprop weight operand is not quantized (nothing to pack)")
    if op.rht:
        raise ValueError(f"the fprop weight uses a {op.rht}-point RHT; its codes live in the "
                         "rotated domain, which compressed-tensors cannot express")
    e5m2 = op.format == QFormat.MXFP8_E5M2 or (
        op.format in (QFormat.FP8_BLOCK, QFormat.FP8_TENSOR) and op.fp8_dtype == "e5m2")
    if e5m2:
        raise ValueError("E5M2 weights have no compressed-tensors format (its FP8 schemes are "
                         "E4M3)")


def pack_weight(w_hp: torch.Tensor, op: OperandConfig) -> PackedWeight:
    """Quantize the ``[out, in]`` weight as ``op`` says and lay it out for compressed-tensors."""
    _check_expressible(op)
    options = {k: v for k, v in op.quantize_kwargs().items() if k != "stochastic"}
    q = quantize(w_hp.detach(), op.format, **options)
    fmt = op.format
    if fmt == QFormat.NVFP4:
        s_enc = nvfp4_global_scales(q.amax)[0]
        return PackedWeight("nvfp4-pack-quantized",
                            _args(4, "tensor_group", 16, "torch.float8_e4m3fn"),
                            {"weight_packed": q.data, "weight_scale": q.scale,
                             "weight_global_scale": s_enc.reshape(1)}, q)
    if fmt == QFormat.MXFP4:
        return PackedWeight("mxfp4-pack-quantized", _args(4, "group", 32, "torch.uint8"),
                            {"weight_packed": q.data, "weight_scale": q.scale}, q)
    if fmt == QFormat.MXFP8_E4M3:
        return PackedWeight("mxfp8-quantized", _args(8, "group", 32, "torch.uint8"),
                            {"weight": q.data, "weight_scale": q.scale}, q)
    if fmt == QFormat.FP8_BLOCK:
        args = _args(8, "block", block=op.block) if op.block[0] > 1 else \
            _args(8, "group", op.block[1])
        return PackedWeight("naive-quantized", args, {"weight": q.data, "weight_scale": q.scale},
                            q)
    return PackedWeight("naive-quantized", _args(8, "tensor"),
                        {"weight": q.data, "weight_scale": q.scale.reshape(1)}, q)


def _layers(model: nn.Module) -> dict[str, Linear]:
    layers = {n: m for n, m in model.named_modules() if isinstance(m, Linear)}
    if not layers:
        raise ValueError("export: the model has no microscale layers; convert it first "
                         "(ms.convert) and train, then export")
    from ..nn.experts import _GroupedBase

    experts = [n for n, m in model.named_modules() if isinstance(m, _GroupedBase)]
    if experts:                  # no silent bf16 experts under a quantized config
        raise ValueError(f"export: {experts[0]!r} (and {len(experts) - 1} more) holds quantized "
                         "MoE experts, which the compressed-tensors export does not write yet "
                         "(their per-expert checkpoint layout is the model type's); save with "
                         "save_pretrained instead (docs/moe.md)")
    conv1d = [n for n, m in layers.items() if isinstance(m, TransposedLinear)]
    if conv1d:
        raise ValueError(f"export: {conv1d[0]!r} (and {len(conv1d) - 1} more) is a Hugging Face "
                         "Conv1D (GPT-2 style, weight [in, out]); compressed-tensors loaders "
                         "quantize nn.Linear modules only, so this model cannot be exported in "
                         "that format")
    return layers


def _state_dict(model: nn.Module, packed: dict[str, PackedWeight], dtype) -> dict:
    """The export's tensors: high-precision ones cast to ``dtype`` (tied ones stay shared, so
    ``save_pretrained`` stores them once), packed weights, converted layers' biases."""
    cast: dict[int, torch.Tensor] = {}
    state = {}
    for key, value in model.state_dict().items():
        layer, _, leaf = key.rpartition(".")
        if layer in packed and leaf in ("weight", "_extra_state"):
            continue
        if value.is_floating_point():
            ident = value.untyped_storage().data_ptr() if value.numel() else id(value)
            value = cast.setdefault(ident, value.detach().to(dtype))
        state[key] = value
    for name, p in packed.items():
        state.update({f"{name}.{k}": v for k, v in p.tensors.items()})
    return state


def _quantization_config(model: nn.Module, packed: dict[str, PackedWeight]) -> dict:
    groups: dict[str, tuple[PackedWeight, list[str]]] = {}
    for name, p in packed.items():
        key = json.dumps([p.format, p.args], sort_keys=True)
        groups.setdefault(key, (p, []))[1].append(name)
    one = len(groups) == 1
    config_groups = {
        f"group_{i}": {"targets": ["Linear"] if one else names, "weights": p.args,
                       "input_activations": None, "output_activations": None,
                       "format": p.format}
        for i, (p, names) in enumerate(groups.values())}
    ignore = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    formats = {p.format for p, _ in groups.values()}
    return {"quant_method": "compressed-tensors", "format": formats.pop() if one else
            "mixed-precision", "quantization_status": "compressed",
            "config_groups": config_groups, "ignore": ignore, "kv_cache_scheme": None,
            "global_compression_ratio": None, "sparsity_config": {}, "transform_config": {}}


def write_compressed_tensors(model: nn.Module, out: Path, dtype: torch.dtype) -> dict:
    """Write the export into the (empty, temporary) directory ``out``; returns its
    ``quantization_config``. :func:`microscale.export` wraps this atomically."""
    from .. import __version__

    if not callable(getattr(model, "save_pretrained", None)):
        raise TypeError("export(format='compressed-tensors') needs a Hugging Face model (with "
                        f"save_pretrained and a config), got {type(model).__name__}")
    packed = {}
    for name, layer in _layers(model).items():
        try:
            packed[name] = pack_weight(layer.gemm_weight(), layer.recipe.fprop.b)
        except ValueError as err:
            raise ValueError(f"export: layer {name!r} (recipe {layer.recipe.name!r}): {err}") \
                from None
    model.save_pretrained(out, state_dict=_state_dict(model, packed, dtype))
    qconfig = _quantization_config(model, packed)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config["quantization_config"] = qconfig
    config["dtype"] = str(dtype).replace("torch.", "")
    if "torch_dtype" in config:
        config["torch_dtype"] = config["dtype"]
    config[RECORD_KEY] = {"export": {
        "format": "compressed-tensors", "microscale_version": __version__,
        "layers": {n: {"recipe": model.get_submodule(n).recipe.name, "format": p.format}
                   for n, p in packed.items()}}}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return qconfig
