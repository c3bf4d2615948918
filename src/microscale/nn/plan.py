"""The static plan of a quantized linear layer: which GEMMs run quantized, and in what form
each operand reaches its GEMM.

Every decision here depends on the :class:`Plan` (the recipe and the precision switches),
shapes, the device and the switches of :data:`CONFIG`, never on a tensor's values: a compiled
graph specialises on them once, and nothing in a step reads a device value on the host.

The operand forms (``tensor.py``): an operand is either codes plus block scales, or
*expanded*, bf16 ``value · block_scale``, the form a Hopper GEMM decodes codes to anyway
(dequantize + bf16 GEMM, ``kernels/gemm_paths.takes_expanded``). Rules:

* :func:`mx8_expands`: MXFP8 A operands are quantized straight into the expanded form
  (``CONFIG["EXPAND_MXFP8"]``), as FP4's are;
* :func:`decodes_b`: a kept B operand in codes (wgrad's xᵀ) is decoded by its own
  ``microscale::expand`` op first where its GEMM would decode it anyway
  (``CONFIG["DECODE_XT_OP"]``), so the compiler sees one node for the xᵀ q, k and v share;
* :func:`same_tiled_weight` / :func:`cacheable_one_view` / :func:`weight_pair_views`: when W
  and Wᵀ are one NVFP4 16×16 quantization (one expanded view, Wᵀ its transpose), may be
  cached for an optimizer step, or quantized many weights at a time;
* :func:`alpha_gemm`: whether an NVFP4 GEMM runs the α GEMM that applies the per-tensor factor
  (and an epilogue op) in its epilogue;
* ``_expand_a``: whether a GEMM's A operand is quantized straight into the expanded form;
  :func:`xt_amax_source`: where a recomputed xᵀ takes its amax from forward.

The per-call choices that need the layer's tensors (``one_weight_view``, the views
themselves) stay in :mod:`microscale.nn.function`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ..backend import triton_available
from ..recipe import Recipe, Rounding
from ..tensor import QFormat, QuantizedTensor

__all__ = ["CONFIG", "N_SEEDS", "ROLES", "Plan", "alpha_gemm", "cacheable_expanded_mx8",
           "xt_amax_source",
           "cacheable_one_view", "decodes_b", "expands_pair", "keeps_xt_expanded", "mx8_expands",
           "same_tiled_weight", "weight_pair_views"]

_TRITON = triton_available()      # asked once: a traced step must not call importlib
# EXPAND_MXFP8: MXFP8 A operands (x for fprop, dy for dgrad and wgrad) quantized straight into
# the expanded form where the GEMM decodes them (the dequant path), as FP4's are; the register
# pair kernel writes them so (quant_mx), saving the GEMM's dequantize pass of each (session 19).
# EXPAND_XT: wgrad's xᵀ, kept for backward, written expanded too where that GEMM decodes it
# (MXFP8: 2 bytes an element kept instead of 1 + 1/32; FP4: 2 instead of 0.56), so backward
# runs no decode pass: a speed-for-memory trade. True / False everywhere, or "auto" (the
# default since session 45): an MXFP8 xᵀ in layers whose input is at most EXPAND_XT_MAX_IN
# wide, where the bytes kept are fewest. H200, session 45 call 4, one process, 125m (inputs
# 768 and 3072 wide), xᵀ codes -> auto: mxfp8 0.848x -> 0.859x of bf16's speed for 0.865x ->
# 0.934x of its peak memory; the same rule for FP4 (2 bytes kept instead of 0.56) paid less
# for more: mxfp4 0.733x -> 0.740x for 0.783x -> 0.873x, nvfp4 0.776x -> 0.781x and
# nvfp4_no_sr 0.786x -> 0.787x for 0.757x -> 0.845x, so FP4 kept codes. Since session 54 an
# NVFP4 xᵀ is kept expanded at every width: at 1b its pair splits (the column view alone,
# expanded, then the row view alone: 79 against 87 µs a 16384x2048 x in forward) and the
# three decode passes a layer (~25 µs each) go, 0.8915x -> 0.8988x of bf16's speed (the means
# of three alternations, H200, session 54 call 3) for 0.804x -> 0.876x of its peak memory
# (issue 11's bound: 0.9x). MXFP4 keeps codes (not measured at 1b). MICROSCALE_EXPAND_XT=0 /
# 1 / auto; bench_train's "@xt-expanded" / "@xt-codes".
# DECODE_XT_OP: a kept xᵀ in codes that the wgrad GEMM would decode is decoded first by the
# ``microscale::expand`` op: the same pass, but identical calls are one node to the compiler,
# so the xᵀ that q, k and v share is decoded once a step instead of three times (session 27).
CONFIG = {"ONE_WEIGHT_VIEW": os.environ.get("MICROSCALE_ONE_WEIGHT_VIEW", "1") != "0",
          "EXPAND_MXFP8": os.environ.get("MICROSCALE_EXPAND_MXFP8", "1") != "0",
          "EXPAND_XT": {"0": False, "auto": "auto"}.get(
              os.environ.get("MICROSCALE_EXPAND_XT", "auto"), True),
          "EXPAND_XT_MAX_IN": 1024,
          "DECODE_XT_OP": os.environ.get("MICROSCALE_DECODE_XT_OP", "1") != "0"}
ROLES = ("fprop.a", "fprop.b", "dgrad.a", "dgrad.b", "wgrad.a", "wgrad.b")
# stochastic rounding draws one seed per quantize_rowcol call (x, W, dy), so no two tensors
# round with the same random stream (a column view uses its call's seed + 1)
N_SEEDS = 3


@dataclass(frozen=True)
class Plan:
    """What one call runs: the recipe and which GEMMs are switched to high precision.

    Frozen and hashable: a compiled graph specialises on it (the precision switches recompile
    once). Mutable state travels separately as tensors (see
    :func:`~microscale.nn.function.linear`).
    """

    recipe: Recipe
    fprop_hp: bool = False
    grads_hp: bool = False
    amax_group: str = ""        # tensorwise FP8 amaxes of x and dy: MAX over this group

    def quantized(self, gemm: str) -> bool:
        hp = self.fprop_hp if gemm == "fprop" else self.grads_hp
        return getattr(self.recipe, gemm).quantized and not hp

    def operand(self, role: str):
        gemm, operand = role.split(".")
        return getattr(getattr(self.recipe, gemm), operand)

    def stochastic_roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if self.quantized(r.split(".")[0])
                     and self.operand(r).rounding == Rounding.STOCHASTIC)


def keeps_xt_expanded(fmt: QFormat, in_features: int) -> bool:
    """Whether a layer whose wgrad xᵀ is ``fmt``, with inputs ``in_features`` wide, keeps that
    xᵀ expanded where its GEMM decodes it (``CONFIG["EXPAND_XT"]``: True, False, or "auto":
    MXFP8 at most ``CONFIG["EXPAND_XT_MAX_IN"]`` wide, NVFP4 at every width)."""
    mode = CONFIG["EXPAND_XT"]
    if mode == "auto":
        return fmt == QFormat.NVFP4 or (fmt.is_mx8
                                        and in_features <= CONFIG["EXPAND_XT_MAX_IN"])
    if not isinstance(mode, bool):
        raise ValueError(f"nn.plan.CONFIG['EXPAND_XT'] must be True, False or 'auto', "
                         f"got {mode!r}")
    return mode


def expands_pair(fmt_a: QFormat, fmt_b: QFormat) -> bool:
    """Whether an ``fmt_a`` x ``fmt_b`` GEMM's operands may be held expanded where it decodes
    them (the layer's A operands, a kept xᵀ, ``saved_activation_bytes``'s accounting): FP4 of
    one format, or MXFP8 x MXFP8 under :func:`mx8_expands`."""
    return (fmt_a.is_fp4 and fmt_b == fmt_a) or mx8_expands(fmt_a, fmt_b)


def mx8_expands(fmt_a: QFormat, fmt_b: QFormat) -> bool:
    """The MXFP8 part of the expansion rule (``nn.function`` and ``nn.grouped``): an MXFP8 x
    MXFP8 GEMM's A operand is quantized expanded while ``CONFIG["EXPAND_MXFP8"]`` is on."""
    return fmt_a.is_mx8 and fmt_b.is_mx8 and CONFIG["EXPAND_MXFP8"]


def decodes_b(plan: Plan, gemm: str, q_b: QuantizedTensor, m: int, k: int) -> bool:
    """Whether ``gemm``'s B operand ``q_b`` (codes) is decoded by its own ``expand`` op first
    (``CONFIG["DECODE_XT_OP"]``): where the GEMM would decode it to the same bf16 form anyway,
    an FP4 x FP4 or MXFP8 x MXFP8 GEMM on the dequant path, or the reference GEMM off CUDA
    (which reads it as ``value · block_scale`` either way: the same numbers)."""
    fmt_a = plan.operand(f"{gemm}.a").format
    if not CONFIG["DECODE_XT_OP"] or q_b.expanded or not q_b.fmt.expandable or not (
            (fmt_a.is_fp4 and q_b.fmt == fmt_a) or (fmt_a.is_mx8 and q_b.fmt.is_mx8)):
        return False
    if q_b.device.type != "cuda" or plan.recipe.backend == "reference" or not _TRITON:
        return True
    from ..kernels.gemm_paths import takes_expanded
    return takes_expanded(fmt_a.value, q_b.fmt.value, m, q_b.rows, k, q_b.device)


def same_tiled_weight(plan: Plan) -> bool:
    """Whether fprop's W and dgrad's Wᵀ are one NVFP4 16×16 RNE quantization (SPEC §3: then
    Wᵀ's is the transpose of W's), what a one-view weight needs (dense or experts)."""
    w, wt = plan.operand("fprop.b"), plan.operand("dgrad.b")
    return w == wt and w.format == QFormat.NVFP4 and w.square_tiles \
        and w.rounding == Rounding.RNE and not w.rht


def cacheable_one_view(plan: Plan, device: torch.device) -> bool:
    """Whether :func:`microscale.weight_cache` may hold W as one expanded 16×16 view serving
    both GEMMs (W and its transpose): :func:`same_tiled_weight`, and no native FP4 GEMM on
    the device (Blackwell's reads codes)."""
    if not (CONFIG["ONE_WEIGHT_VIEW"] and same_tiled_weight(plan)):
        return False
    if device.type != "cuda" or plan.recipe.backend == "reference" or not _TRITON:
        return True
    from ..kernels.blackwell import has_native_block_scaling
    return not has_native_block_scaling(device)


def cacheable_expanded_mx8(plan: Plan, shape, device: torch.device) -> bool:
    """Whether :func:`microscale.weight_cache` may hold an MXFP8 W ``[N, K]`` and its Wᵀ
    expanded (bf16 ``value · 2^k``): both GEMMs that read them (fprop ``x · Wᵀ``, dgrad ``dy ·
    W``) MXFP8 x MXFP8 with ``CONFIG["EXPAND_MXFP8"]`` on, and decoding their operands at any
    token count (``gemm_paths.dequant_at_every_m``; the reference GEMM off CUDA reads them as
    ``value · block_scale`` either way)."""
    fa, fb = plan.operand("fprop.a").format, plan.operand("fprop.b").format
    da, db = plan.operand("dgrad.a").format, plan.operand("dgrad.b").format
    if not (mx8_expands(fa, fb) and mx8_expands(da, db)):
        return False
    if device.type != "cuda" or plan.recipe.backend == "reference" or not _TRITON:
        return True
    from ..kernels.gemm_paths import dequant_at_every_m
    n, k = shape
    return dequant_at_every_m(fa.value, fb.value, n, k, device) \
        and dequant_at_every_m(da.value, db.value, k, n, device)


def weight_pair_views(plan: Plan):
    """``(row, col)`` as ``(format, options)``: the W / Wᵀ views that
    :func:`~microscale.nn.function.weight_views` would quantize, when both are plain (quantized,
    round-to-nearest, current scaling), so that many layers' weights can be quantized in one
    call (:func:`microscale.weight_cache`); else None."""
    if not (plan.quantized("fprop") and plan.quantized("dgrad")):
        return None
    ops = [plan.operand("fprop.b"), plan.operand("dgrad.b")]
    if any(op.delayed or op.rounding == Rounding.STOCHASTIC for op in ops):
        return None
    return tuple((op.format, op.quantize_kwargs() | {"check_finite": False}) for op in ops)


def alpha_gemm(fmt_a: str, fmt_b: str, m: int, n: int, k: int, out_dtype: torch.dtype,
               device: torch.device, backend: str) -> bool:
    """Whether an ``[m, k] · [n, k]ᵀ`` GEMM of these formats into ``out_dtype`` runs NVFP4's α
    GEMM (``kernels/gemm_alpha``: α, and an epilogue op, applied in its epilogue), on the
    kernels' backend (``gemm_paths.factor_in_epilogue``)."""
    if device.type != "cuda" or backend == "reference" or not _TRITON:
        return False
    from ..kernels.gemm_paths import factor_in_epilogue
    return factor_in_epilogue(fmt_a, fmt_b, m, n, k, out_dtype, device)


def xt_amax_source(plan: Plan) -> str | None:
    """Where wgrad's xᵀ view, quantized in backward from a recompute (``nn.recompute``), can
    take its amax from forward instead of a pass of its own over x: ``"fprop"`` (both views
    current tensorwise FP8: fprop's amax of x is xᵀ's), ``"measured"`` (both NVFP4, xᵀ
    rounded to nearest and 1x16: the amax pass that measures fprop's view measures xᵀ's too,
    after the RHT where xᵀ has it, and forward keeps that 0-d tensor), or None."""
    if not plan.quantized("fprop"):
        return None
    fa, wb = plan.operand("fprop.a"), plan.operand("wgrad.b")
    if fa.delayed or wb.delayed or fa.format != wb.format:
        return None
    if fa.format == QFormat.FP8_TENSOR:
        return "fprop"
    if fa.format == QFormat.NVFP4 and wb.rounding != Rounding.STOCHASTIC \
            and not wb.quantize_kwargs().get("block_2d", False):
        return "measured"
    return None


def _expand_a(plan: Plan, gemm: str, m: int, n: int, k: int, device: torch.device) -> bool:
    """Whether ``gemm``'s A operand (consumed at once; so is a B recomputed in backward,
    ``nn.recompute``) is quantized straight into the expanded form, bf16 ``value ·
    block_scale`` (``tensor.py``): FP4 operands, and MXFP8 ones with
    ``CONFIG["EXPAND_MXFP8"]``, where that GEMM decodes them to it anyway
    (``kernels/gemm_paths.takes_expanded``; the reference GEMM off CUDA)."""
    fmt_a, fmt_b = plan.operand(f"{gemm}.a").format, plan.operand(f"{gemm}.b").format
    if not expands_pair(fmt_a, fmt_b):
        return False
    if device.type != "cuda" or plan.recipe.backend == "reference" or not _TRITON:
        return True
    from ..kernels.gemm_paths import takes_expanded
    return takes_expanded(fmt_a.value, fmt_b.value, m, n, k, device)
