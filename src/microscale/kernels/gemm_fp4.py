"""NVFP4 / MXFP4 / MXFP8 GEMM emulation on Hopper: E2M1 and MX codes through bf16 tensor cores.

Hopper has no FP4 (and no block-scaled FP8) tensor-core instruction, so ``y = A Bᵀ`` for
block-scaled operands is emulated. SPEC §6 makes that exact up to summation order::

    y[m, n] = f · Σ_k (value(a_mk) · sa[m, k/bs]) · (value(b_nk) · sb[n, k/bs])

Every ``value · block_scale`` product is exactly representable in bf16: an E2M1 value has
two significant bits, an E4M3 scale four (NVFP4: at most six bits together, exponents
2^-10 .. 2688); an MX scale is a power of two, so MXFP4/MXFP8 products keep the element's
own 2 or 4 significant bits. A bf16 GEMM with fp32 accumulation over those partially
dequantized operands, times the per-tensor factor ``f`` (``gemm.gemm_factor``: NVFP4's
``α = amax_a · amax_b / 7225344``, 1 for MX) in fp32, therefore computes the reference.

Memory layout consumed (``tensor.py``)::

    FP4   data  uint8 [rows, K/2]   byte j = codes of elements 2j (low nibble), 2j+1 (high)
          scale NVFP4: E4M3 bytes [rows, K/16];  MXFP4: UE8M0 bytes [rows, K/32]
    MXFP8 data  fp8 [rows, K] (read as uint8), scale UE8M0 bytes [rows, K/32]

Two strategies, chosen per shape by :func:`fp4_strategy` (or forced by the ``strategy=``
argument of :func:`scaled_mm_fp4`):

* ``"mainloop"`` -- one Triton kernel. Each K step loads the packed bytes of an A tile and a
  B tile, decodes them in registers to bf16 ``value · scale``, and issues ``tl.dot`` (bf16
  operands, fp32 accumulator); ``f`` is applied in the epilogue. The low and high nibbles of
  a byte are *not* interleaved back: since a dot product may visit K in any order as long as
  A and B agree, the kernel issues one dot over the even elements (low nibbles) and one over
  the odd elements (high nibbles). Reads 4.5 bits per operand element, no intermediate.
* ``"dequant"`` -- a memory-bound Triton pass writes each operand as bf16 ``value · scale``
  (``[rows, K]``), then cuBLAS does the bf16 GEMM and ``f`` is applied after (NVFP4 only;
  f = 1 for MX; that GEMM with its factor, or the α-epilogue kernel, is ``gemm_alpha.py``'s).
  Costs one extra write + read of 2 bytes per operand element, but the GEMM is cuBLAS's.

Measured on an H200 (``benchmarks/results/gemm_notes.md``): the dequantize pass runs at
~80% of the copy rate and "dequant" reaches 0.78-1.02x bf16 cuBLAS time for NVFP4 and
0.92-1.11x for MXFP4; the mainloop kernel is ALU-bound on the decode at ~220-250 TF/s
(0.27-0.37x), slower at every M tried down to 64, so the heuristic picks "dequant" unless
its temporaries would be too large.

The decode itself (bit arithmetic, NaN bytes) and both kernels: ``gemm_fp4_decode.py``.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..backend import (
    KernelUnsupported,
    _interpreting,
    mm_key,
    note_path,
    register_kernel,
)
from ..gemm import gemm_factor
from ..op_specs import apply_prologue
from ..tensor import QFormat, QuantizedTensor
from ._utils import cdiv, gemm_out
from .gemm_alpha import _bf16_gemm_with_factor
from .gemm_fp4_decode import _dequant_kernel, _mainloop_kernel
from .gemm_paths import alpha_epilogue

__all__ = ["scaled_mm_fp4", "scaled_mm_mxfp8", "dequantize_bf16", "fp4_strategy",
           "STRATEGIES"]

STRATEGIES = ("auto", "mainloop", "dequant")
_ELEM_E2M1, _ELEM_E4M3, _ELEM_E5M2 = 0, 1, 2
_SCALE_E4M3, _SCALE_UE8M0 = 0, 1


# ----------------------------------------------------------------------------- host side
def _operand(q: QuantizedTensor) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """``(code bytes [rows, KB], scale bytes [rows, KS], elem, scale kind, elems per scale)``."""
    if q.fmt == QFormat.NVFP4:
        elem, kind = _ELEM_E2M1, _SCALE_E4M3
        scale = q.scale.view(torch.uint8)
    elif q.fmt == QFormat.MXFP4:
        elem, kind, scale = _ELEM_E2M1, _SCALE_UE8M0, q.scale
    elif q.fmt.is_mx8:
        elem = _ELEM_E4M3 if q.fmt == QFormat.MXFP8_E4M3 else _ELEM_E5M2
        kind, scale = _SCALE_UE8M0, q.scale
    else:
        raise KernelUnsupported(f"{q.fmt.value} is not an FP4/MXFP8 format")
    if q.block[0] != 1 and q.fmt != QFormat.NVFP4:
        raise KernelUnsupported(f"{q.fmt.value} with block {q.block}")
    data = q.data.view(torch.uint8)
    if data.stride(-1) != 1 or scale.stride(-1) != 1:
        raise KernelUnsupported("codes and scales must be contiguous along K")
    return data, scale, elem, kind, q.block[1]


def _scales_per_tile(bkb: int, elem: int, block: int) -> int:
    elems = 2 * bkb if elem == _ELEM_E2M1 else bkb
    if elems % block:
        raise KernelUnsupported(f"tile of {elems} elements is not a multiple of block {block}")
    return elems // block


def dequantize_bf16(q: QuantizedTensor, block_rows: int = 16, block_bytes: int = 128,
                    permute_k: bool = False, num_warps: int = 4) -> torch.Tensor:
    """``value · block_scale`` as bf16 ``[rows, K]`` (exact; the per-tensor factor is not applied).

    ``permute_k=True`` (FP4 only) writes each ``block_bytes`` chunk's even elements, then its
    odd ones: a fixed permutation of K, harmless to a GEMM whose two operands share it.
    An expanded operand (``q.expanded``) already is that matrix and comes back as it is.
    """
    if q.expanded:
        if permute_k:
            raise KernelUnsupported("permute_k on an expanded operand")
        return q.data
    data, scale, elem, kind, block = _operand(q)
    rows, kb = data.shape
    k = 2 * kb if elem == _ELEM_E2M1 else kb
    y = torch.empty((rows, k), dtype=torch.bfloat16, device=data.device)
    ns = _scales_per_tile(block_bytes, elem, block)
    grid = (cdiv(rows, block_rows), cdiv(kb, block_bytes))
    _dequant_kernel[grid](data, scale, y, rows, kb, scale.shape[1], data.stride(0),
                          scale.stride(0), y.stride(0), ELEM=elem, SCALE=kind, NS=ns,
                          PACKED=elem == _ELEM_E2M1, PERMUTE_K=permute_k, BR=block_rows,
                          BKB=block_bytes, num_warps=num_warps)
    return y


def _mainloop(qa, qb, out_dtype, apply_factor=True, bm=128, bn=None, bkb=None, group_m=8,
              num_warps=8, num_stages=None) -> torch.Tensor:
    """Launch the dequantize-in-mainloop kernel; ``bkb`` is the K step in bytes of codes."""
    a, sa, ea, ka, blk_a = _operand(qa)
    b, sb, eb, kb_, blk_b = _operand(qb)
    packed = ea == _ELEM_E2M1
    if packed != (eb == _ELEM_E2M1):
        raise KernelUnsupported("cannot mix an FP4 operand with an FP8 operand")
    # Tiles measured best on an H200 at 8192^3 (benchmarks/results/gemm_notes.md): FP4
    # 128x256 with 64 elements per K step, 4 stages; MXFP8 128x128 with 128, 3 stages.
    bn = bn or (256 if packed else 128)
    bkb = bkb or (32 if packed else 128)
    num_stages = num_stages or (4 if packed else 3)
    m, kbytes = a.shape
    n = b.shape[0]
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    f = gemm_factor(qa, qb).float().reshape(1) if apply_factor else \
        torch.ones(1, dtype=torch.float32, device=a.device)
    grid = (cdiv(m, bm) * cdiv(n, bn),)
    _mainloop_kernel[grid](a, sa, b, sb, f, y, m, n, kbytes, sa.shape[1], sb.shape[1],
                           a.stride(0), sa.stride(0), b.stride(0), sb.stride(0), y.stride(0),
                           ELEM_A=ea, SCALE_A=ka, NSA=_scales_per_tile(bkb, ea, blk_a),
                           ELEM_B=eb, SCALE_B=kb_, NSB=_scales_per_tile(bkb, eb, blk_b),
                           PACKED=packed, BM=bm, BN=bn, BKB=bkb, GROUP_M=group_m,
                           DOT_F32=_interpreting(), num_warps=num_warps, num_stages=num_stages)
    return y


# Dequantize-pass settings (tuned on an H200, see benchmarks/results/gemm_notes.md).
# Every tile shape tried ran at 3.1-3.45 TB/s (80% of the copy rate); the permuted store
# measured no faster than the natural one, so the natural order is the default.
DEQUANT_CONFIG = dict(block_rows=16, block_bytes=128, permute_k=False, num_warps=4)


def _dequant_then_cublas(qa, qb, out_dtype, apply_factor=True, epilogue=None,
                         **cfg) -> torch.Tensor:
    """Both operands to bf16 ``value · scale`` (Triton), one cuBLAS GEMM, then ``f``."""
    cfg = {**DEQUANT_CONFIG, **cfg}
    if not (qa.fmt.is_fp4 and qb.fmt.is_fp4):
        cfg["permute_k"] = False
    a_bf16, b_bf16 = dequantize_bf16(qa, **cfg), dequantize_bf16(qb, **cfg)
    # MX has no per-tensor factor (f = 1 exactly): skip the epilogue pass entirely
    f = None
    if apply_factor and qa.fmt == qb.fmt == QFormat.NVFP4:
        f = (qa.amax, qb.amax)                # α made where it is applied
    elif apply_factor and QFormat.NVFP4 in (qa.fmt, qb.fmt):
        f = gemm_factor(qa, qb).float()
    return _bf16_gemm_with_factor(a_bf16, b_bf16, f, out_dtype, epilogue)


# Measured on an H200 (benchmarks/results/gemm_notes.md): dequantize + cuBLAS beat the
# mainloop kernel at every shape tried, M = 64 .. 16384 (the in-register decode is ALU-bound
# at ~200 TF/s; the dequantize pass decodes the same elements ~5x faster at 80% of the copy
# rate). The mainloop kernel is kept for when the bf16 copies of the operands would not fit:
# it reads 4.5 bits per element and needs no temporary.
DEQUANT_MAX_TEMP_BYTES = 8 << 30


def fp4_strategy(m: int, n: int, k: int) -> str:
    """Pick ``"dequant"`` unless its bf16 temporaries (``2·(m + n)·k`` bytes) exceed the cap."""
    return "dequant" if 2 * (m + n) * k <= DEQUANT_MAX_TEMP_BYTES else "mainloop"


def _run(qa, qb, out_dtype, strategy, apply_factor=True, epilogue=None, **tile) -> torch.Tensor:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if out_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise KernelUnsupported(f"out_dtype {out_dtype}")
    if strategy == "auto":
        strategy = "dequant" if qa.expanded or qb.expanded else \
            fp4_strategy(qa.rows, qb.rows, qa.cols)
    if strategy == "mainloop":
        if qa.expanded or qb.expanded:
            raise KernelUnsupported("the mainloop GEMM decodes codes; an operand is expanded")
        y = _mainloop(qa, qb, out_dtype, apply_factor, **tile)
        if epilogue is not None:
            y = apply_prologue(epilogue[0], y, epilogue[1])
    else:
        y = _dequant_then_cublas(qa, qb, out_dtype, apply_factor, epilogue, **tile)
    if strategy == "mainloop":
        note = "triton decode-in-mainloop GEMM" + _epilogue_note(epilogue, False)
    else:
        alpha = _alpha(qa, qb, out_dtype, apply_factor)
        note = "triton dequantize + " + ("Triton bf16 GEMM, alpha in its epilogue" if alpha
                                         else "cuBLAS bf16 GEMM") \
            + _expanded_note(qa, qb) + _epilogue_note(epilogue, alpha)
    note_path("scaled_mm", mm_key(qa.fmt.value, qb.fmt.value), note)
    return gemm_out(y, qa, qb)


def _alpha(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype, apply_factor) -> bool:
    """Whether the dequant path's GEMM is ``gemm_alpha``'s kernel (α in its epilogue)."""
    return apply_factor and QFormat.NVFP4 in (qa.fmt, qb.fmt) \
        and alpha_epilogue(out_dtype, qa.device, qa.rows, qb.rows)


def _epilogue_note(epilogue: tuple | None, fused: bool) -> str:
    if epilogue is None:
        return ""
    note = f"; {epilogue[0]} of the result " + ("in the epilogue too" if fused else "after it") \
        if epilogue[0] else ""
    if len(epilogue) > 2 and epilogue[2] is not None and fused:     # an op_specs.OutAmax
        note += "; its NVFP4 amaxes measured in the epilogue"
    return note


def _expanded_note(qa: QuantizedTensor, qb: QuantizedTensor) -> str:
    done = [n for n, q in (("A", qa), ("B", qb)) if q.expanded]
    return f" ({' and '.join(done)} given expanded: no dequantize pass here)" if done else ""


def scaled_mm_fp4(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype = torch.float32,
                  strategy: str = "auto", apply_factor: bool = True, epilogue: tuple | None = None,
                  **tile) -> torch.Tensor:
    """NVFP4/MXFP4 ``A @ Bᵀ`` (same contract as ``gemm.scaled_mm_reference``); ``epilogue``
    ``(op, e2)``: ``op(y, e2)`` of the result (``op_specs.PROLOGUES``), applied in the α GEMM's
    epilogue where that kernel runs (``gemm_alpha``), after the GEMM elsewhere."""
    if not (qa.fmt.is_fp4 and qb.fmt.is_fp4):
        raise KernelUnsupported(f"{qa.fmt.value} x {qb.fmt.value} is not FP4 x FP4")
    return _run(qa, qb, out_dtype, strategy, apply_factor, epilogue, **tile)


def scaled_mm_mxfp8(qa: QuantizedTensor, qb: QuantizedTensor,
                    out_dtype: torch.dtype = torch.float32, strategy: str = "auto",
                    **tile) -> torch.Tensor:
    """MXFP8 (E4M3/E5M2, any pairing) ``A @ Bᵀ``: FP8 codes and UE8M0 scales through bf16."""
    if not (qa.fmt.is_mx8 and qb.fmt.is_mx8):
        raise KernelUnsupported(f"{qa.fmt.value} x {qb.fmt.value} is not MXFP8 x MXFP8")
    return _run(qa, qb, out_dtype, strategy, **tile)


# Registration: kernels/gemm_block.py (Blackwell's native GEMM first, then the per-shape
# table of kernels/gemm_paths.py between these strategies and the FP8 tensor-core kernel).


def expand_triton(q: QuantizedTensor) -> QuantizedTensor:
    """Kernel twin of ``QuantizedTensor.expand``: the dequantize pass, for a view whose
    quantizer did not write the expanded form itself."""
    note_path("expand", q.fmt.value, "triton dequantize pass (the quantizer wrote codes)")
    return replace(q, data=dequantize_bf16(q), expanded=True)


for _fmt in (QFormat.NVFP4, QFormat.MXFP4, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2):
    register_kernel("expand", _fmt.value)(expand_triton)
