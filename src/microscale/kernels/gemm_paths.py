"""Which GEMM path runs for which operands and shape: one table, one function.

Every block-scaled ``scaled_mm`` call has several correct implementations; which one is
fastest depends on the device and on the shape (issue 12, item 5: at the 50m/125m training
shapes, M = 8192-16384 tokens and K, N = 640-3072, launch and pass overheads weigh more than
at 8192³). The choice is made here and nowhere else:

=========== ====================================================================================
family      paths
=========== ====================================================================================
``fp8``     ``torch``: cuBLASLt through ``F.scaled_mm`` / ``torch._scaled_mm`` (falls back to
            Triton when torch refuses); ``triton``: the Triton FP8 blockwise kernel
``fp4``     ``dequant``: Triton dequantize pass + cuBLAS bf16; ``mainloop``: decode in the GEMM
``mxfp8``   ``fp8``: FP8 tensor cores (Hopper: Gluon ``gemm_mxfp8_wgmma``; else or with a
            ``config``: ``tl`` ``gemm_mxfp8``); ``dequant``; ``mainloop``
=========== ====================================================================================

On Blackwell (compute capability 10.x-12.x) the native block-scaled GEMM comes first for the
formats it takes (``kernels/blackwell.py``); the table decides among the others.

Decision: the first rule of :func:`table` whose ``family`` matches and whose ``m``/``n``/``k``
ranges (``[lo, hi]``, inclusive, ``None`` = open) contain the shape gives the path (and, for
``mxfp8``/``fp8``, an optional tile ``config``); a rule naming a path the device cannot run
is skipped. With no match, the family default, which is what ran before the table existed:
``fp8`` → ``torch``; ``fp4`` → ``dequant`` unless its bf16 temporaries exceed
``gemm_fp4.DEQUANT_MAX_TEMP_BYTES`` (then ``mainloop``); ``mxfp8`` → ``dequant`` (the FP8
tensor-core kernel, ``fp8``, runs where a rule asks for it, on devices with FP8 tensor cores,
8.9+, until a GPU measurement makes it the default).

Expanded operands: where the chosen path is ``dequant``, the GEMM decodes both operands to bf16
``value · block_scale`` first. :func:`takes_expanded` tells the layer so before it quantizes, and
the layer then asks the quantizer for that form directly (``expand``, ``tensor.py``) for the
operands it consumes at once (x for fprop, dy for dgrad and wgrad): no codes written, read back
and decoded in a pass of their own. Operands saved for backward (xᵀ) and weights quantized per
layer stay codes; MXFP8 weights quantized together by ``ms.weight_cache`` are written expanded
where :func:`dequant_at_every_m` says both GEMMs decode them (``nn.weight_cache``).
The NVFP4 passes are ALU-bound, so their extra bf16 stores cost less than the dequantize pass
they replace (125m step, H100: dequantize 6.8 → 2.2 ms, quantize 22.4 → 24.9 ms, 0.546x →
0.563x of bf16); the MXFP4 kernel likewise since session 14 (125m mxfp4 0.489x → 0.547x, 1b
0.673x → 0.734x). MXFP8 since session 19 (``nn.function.CONFIG["EXPAND_MXFP8"]``): session 9's
attempt made its register pass 2.2x slower (8.8 → 19.4 ms), more than the 6.7 ms of
dequantize it saved; the register pair kernel now decodes its own bytes with the hardware
conversions (~8 SASS instructions an element), and the step gained: 125m mxfp8 0.700x →
0.733x, 1b 0.869x → 0.914x (H100, same process; the dy pair at 16384x2048 119 µs against 76
for codes, each of the three dequantize passes it saves reading 1 and writing 2 bytes an
element).

NVFP4's per-tensor factor α: on the ``dequant`` path with a bf16/fp16 output, the GEMM is the
Triton kernel of ``gemm_alpha`` (α read from the device in its epilogue, the output written in
its dtype) instead of cuBLAS with an fp32 output that the caller multiplies by α and casts.
:func:`factor_in_epilogue` tells the layer before it calls, so that it asks for the output dtype
(switch: :data:`EPILOGUE`).

Updating it: ``benchmarks/bench_gemm_sweep.py`` times every path at the training shapes and
writes a suggested rule list (JSON). Point ``MICROSCALE_GEMM_TABLE`` at that file to use it
without a code change, or paste it into :data:`RULES` and commit it with the measurement.
"""

from __future__ import annotations

import json
import os

import torch

__all__ = ["FAMILIES", "RULES", "choose_path", "family_of", "set_table", "table",
           "takes_expanded", "dequant_at_every_m", "factor_in_epilogue", "alpha_epilogue",
           "output_tiles", "EPILOGUE"]

FAMILIES = {"fp8": ("torch", "triton"), "fp4": ("dequant", "mainloop"),
            "mxfp8": ("fp8", "dequant", "mainloop")}
# Built-in rules: only where a path beats the family default with the GEMM timed as training
# runs it, replayed from a CUDA graph (bench_gemm_sweep.py, session 8 on an H100, torch 2.11,
# Triton 3.6, 2026-11-25; logs in benchmarks/results/h100_20261125_session8/). At the 125m and
# 1b shapes (T = 16384) the defaults win everywhere: cuBLASLt for FP8 (0.87-1.62x bf16 against
# 0.14-0.83x for the Triton kernel) and dequantize + cuBLAS for FP4 (0.57-0.91x against
# 0.04-0.50x for the decode-in-main-loop kernel). Session 4's eight rules (Triton FP8, mainloop
# FP4 at the 50m/125m shapes) came from eager timings, where a wrapper's host time (~0.45 ms)
# decided the small shapes; graph-replayed, the mainloop rule at 16384x768x768 was 1.84x slower
# than the default, so they are gone. At the 50m shapes one rule beat its default by > 3%.
RULES: list[dict] = [
    {"family": "fp8", "m": [16384, 16384], "n": [128, 128], "k": [640, 640], "path": "triton",
     "config": {"bm": 128, "bn": 64, "num_warps": 4, "num_stages": 4}},   # 1.06x
]
_ACTIVE: list[list[dict] | None] = [None]
# "alpha": NVFP4 x NVFP4 on the dequant path with a 2-byte output runs the Triton GEMM that
# applies α in its epilogue (gemm_alpha), not cuBLAS + an fp32 output. Read when a layer is
# traced (compiled graphs keep what they saw).
# "fp32_min_tiles": an fp32 output (wgrad's) takes that GEMM too where it has at least this many
# 128x256 output tiles; below, cuBLAS's fp32 sum and then a pass multiplying it by α (8 bytes an
# output element). Session 33 sent every fp32 output there: the 4096 -> 14336 layer ran 1.4%
# faster graph-replayed, but the 125m nvfp4 step 0.752x -> 0.640x of bf16, because its weight
# gradients are 6-72 tiles on 132 SMs and the kernel has no split-K where cuBLAS splits K.
# Session 39 (H200, bench_alpha_mm.py --wgrad, T = 16384, graph-replayed; cuBLAS + the α pass
# / this kernel): 1.01-1.08x at 128-1792 tiles (350m up/down, 1b q/o/up/down, the 4096 -> 14336
# layer), 0.16-0.75x at 6-72 (every 125m projection, 350m q/o, 1b k/v); the 1b nvfp4 step
# 0.891x / 0.897x -> 0.901x of bf16 in one process. None: never.
EPILOGUE = {"alpha": True, "fp32_min_tiles": 128}
_TILE_MN = (128, 256)                     # gemm_alpha.CONFIG's TILE and SMALL_TILE (BM, BN)


def _validate(rules: list[dict]) -> list[dict]:
    for rule in rules:
        fam, path = rule.get("family"), rule.get("path")
        if fam not in FAMILIES or path not in FAMILIES[fam]:
            raise ValueError(f"GEMM path rule {rule}: family must be one of {sorted(FAMILIES)} "
                             f"and path one of its paths {FAMILIES.get(fam)}")
        for dim in ("m", "n", "k"):
            lo_hi = rule.get(dim, [None, None])
            if not (isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2):
                raise ValueError(f"GEMM path rule {rule}: {dim} must be [lo, hi]")
    return list(rules)


def table() -> list[dict]:
    """The active rules: ``MICROSCALE_GEMM_TABLE`` (a JSON list) if set, else :data:`RULES`."""
    if _ACTIVE[0] is None:
        path = os.environ.get("MICROSCALE_GEMM_TABLE")
        if path:
            with open(path) as f:
                _ACTIVE[0] = _validate(json.load(f))
        else:
            _ACTIVE[0] = _validate(RULES)
    return _ACTIVE[0]


def set_table(rules: list[dict] | None) -> None:
    """Replace the active rules (``None``: back to the environment / built-in ones)."""
    _ACTIVE[0] = None if rules is None else _validate(rules)


def family_of(fmt_a: str, fmt_b: str) -> str | None:
    """The table family of an operand format pair (None: no table decision for it)."""
    fmts = {fmt_a, fmt_b}
    if fmts <= {"fp8_block", "fp8_tensor"}:
        return "fp8"
    if fmts <= {"nvfp4"} or fmts <= {"mxfp4"}:
        return "fp4"
    if fmts <= {"mxfp8_e4m3", "mxfp8_e5m2"}:
        return "mxfp8"
    return None


def _inside(value: int, lo_hi) -> bool:
    lo, hi = lo_hi
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _default(family: str, m: int, n: int, k: int, fp8_tensor_cores: bool) -> str:
    if family == "fp8":
        return "torch"
    if family == "fp4":
        from .gemm_fp4 import fp4_strategy
        return fp4_strategy(m, n, k)
    # mxfp8: dequantize + cuBLAS (measured 0.97-1.09x bf16) stays the default until the FP8
    # tensor-core kernel has been timed on a GPU (its own estimate: ~1.0x); a rule with
    # "path": "fp8" (or MICROSCALE_GEMM_TABLE) selects it.
    return "dequant"


def choose_path(family: str, m: int, n: int, k: int,
                fp8_tensor_cores: bool = True) -> tuple[str, dict, str]:
    """``(path, tile config, why)`` for a GEMM ``[m, k] × [n, k]ᵀ`` of ``family``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown GEMM family {family!r}; expected one of {sorted(FAMILIES)}")
    for i, rule in enumerate(table()):
        if rule["family"] != family or not all(
                _inside(v, rule.get(d, [None, None])) for v, d in ((m, "m"), (n, "n"), (k, "k"))):
            continue
        if rule["path"] == "fp8" and not fp8_tensor_cores:
            continue
        return rule["path"], dict(rule.get("config") or {}), f"table rule {i}"
    return _default(family, m, n, k, fp8_tensor_cores), {}, "default"


def takes_expanded(fmt_a: str, fmt_b: str, m, n, k, device: torch.device) -> bool:
    """Whether the kernels' ``scaled_mm`` of an ``[m, k]`` A in ``fmt_a`` and an ``[n, k]`` B
    in ``fmt_b`` decodes its FP4 or MXFP8 operands to bf16 ``value · block_scale`` (the
    ``dequant`` path), so the layer may have A quantized straight into that form (the layer
    itself decides off CUDA, where the reference GEMM runs, and whether MXFP8 does:
    ``nn.function._expand_a``). Blackwell's native GEMM reads codes: False there. Shapes that
    are not plain ints (dynamic shapes under a compiler): False."""
    family = family_of(fmt_a, fmt_b)
    if family not in ("fp4", "mxfp8") or not all(type(v) is int for v in (m, n, k)):
        return False
    return _takes_expanded_cuda(family, m, n, k, str(device))


@torch.compiler.assume_constant_result
def _takes_expanded_cuda(family: str, m: int, n: int, k: int, device: str) -> bool:
    """(A constant to dynamo: it asks the device's capability, which it need not trace.)"""
    from .blackwell import has_native_block_scaling
    from .gemm_mxfp8 import has_fp8_tensor_cores
    dev = torch.device(device)
    if has_native_block_scaling(dev):          # FP4 x FP4 of one format: the native GEMM
        return False
    return choose_path(family, m, k=k, n=n, fp8_tensor_cores=has_fp8_tensor_cores(dev))[0] \
        == "dequant"


def dequant_at_every_m(fmt_a: str, fmt_b: str, n: int, k: int, device: torch.device) -> bool:
    """Whether :func:`takes_expanded` holds for every ``m`` at this ``(n, k)``: an MXFP8 GEMM
    (whose default path is ``dequant`` at every shape) on a device without native block-scaled
    GEMMs, and no rule of the active table covering ``(n, k)`` sends it elsewhere. What a weight
    quantized before the token count is known (``ms.weight_cache``) asks before it is written
    expanded. False for other families (FP4's default depends on ``m``)."""
    if family_of(fmt_a, fmt_b) != "mxfp8":
        return False
    from .blackwell import has_native_block_scaling
    from .gemm_mxfp8 import has_fp8_tensor_cores
    dev = torch.device(device)
    if dev.type == "cuda" and has_native_block_scaling(dev):
        return False
    fp8_ok = dev.type == "cuda" and has_fp8_tensor_cores(dev)
    return not any(
        rule["family"] == "mxfp8" and rule["path"] != "dequant"
        and (rule["path"] != "fp8" or fp8_ok)
        and all(_inside(v, rule.get(d, [None, None])) for v, d in ((n, "n"), (k, "k")))
        for rule in table())


def alpha_epilogue(out_dtype: torch.dtype, device, m=None, n=None) -> bool:
    """Whether a bf16 GEMM with a per-tensor factor into an ``[m, n]`` ``out_dtype`` on
    ``device`` runs the ``gemm_alpha`` kernel (the factor in its epilogue, the output written
    directly): the one rule that the dequant path's GEMM (``gemm_alpha._bf16_gemm_with_factor``),
    its ``ms.explain`` note (``gemm_fp4``) and the layer's :func:`factor_in_epilogue` all read.
    A 2-byte output always; an fp32 one where it has ``EPILOGUE["fp32_min_tiles"]`` output
    tiles or more (``m`` and ``n`` plain ints: not under dynamic shapes)."""
    if not EPILOGUE["alpha"] or torch.device(device).type != "cuda":
        return False
    if out_dtype in (torch.bfloat16, torch.float16):
        return True
    least = EPILOGUE["fp32_min_tiles"]
    if out_dtype != torch.float32 or least is None or not (type(m) is int and type(n) is int):
        return False
    return output_tiles(m, n) >= least


def output_tiles(m: int, n: int) -> int:
    """The α kernel's output tiles (128x256) of an ``[m, n]`` result: what
    ``EPILOGUE["fp32_min_tiles"]`` counts (``bench_alpha_mm.py --wgrad`` reports it)."""
    return -(-m // _TILE_MN[0]) * -(-n // _TILE_MN[1])


def factor_in_epilogue(fmt_a: str, fmt_b: str, m, n, k, out_dtype: torch.dtype,
                       device: torch.device) -> bool:
    """Whether the kernels' ``scaled_mm`` of NVFP4 ``[m, k]`` x ``[n, k]`` into ``out_dtype``
    applies α itself and writes ``out_dtype`` in one kernel (``gemm_alpha``), so the caller
    should ask for that dtype rather than an fp32 sum to scale (``nn.function._gemm``)."""
    if not (fmt_a == fmt_b == "nvfp4") or not alpha_epilogue(out_dtype, device, m, n):
        return False
    return takes_expanded(fmt_a, fmt_b, m, n, k, device)
