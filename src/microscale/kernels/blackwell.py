"""Blackwell's native block-scaled GEMMs (compute capability 10.x and 12.x) via torch.

**Status: not yet run on such a GPU.** The layouts and argument packing below are tested
bit-exact on CPU; the hardware call has only been exercised up to its argument checks.

From compute capability 10.0 (B200/GB200) and 12.0 (RTX 50 / RTX PRO Blackwell) the tensor
cores take FP4/FP8 operands *with* their block scales: cuBLASLt computes
``Σ_k a·sa[m, k/bs] · b·sb[n, k/bs]`` in hardware, with bs = 16 (NVFP4: E4M3 scales) or 32
(MX: UE8M0 scales). torch exposes it as ``torch.nn.functional.scaled_mm`` (torch >= 2.10:
``ScalingType.BlockWise1x16`` / ``BlockWise1x32``, ``SwizzleType.SWIZZLE_32_4_4``) and, older,
``torch._scaled_mm`` (the recipe inferred from the scale dtypes). Requirements (torch's
``ScaledBlas.cpp``, read for torch 2.11-2.13):

* ``mat_a`` ``[M, K]`` row-major, ``mat_b`` ``[K, N]`` column-major: our ``A`` and ``B.t()``,
  both K-contiguous. This "TN" layout is the only one cuBLAS offers for block-scaled FP8 on
  12.x (pytorch#198126), so nothing here depends on 10.x's wider layout support.
* NVFP4 / MXFP4 operands are ``torch.float4_e2m1fn_x2`` ``[rows, K/2]``, element 2j in the low
  nibble: exactly our packed bytes (``formats.pack_fp4``), reinterpreted with ``.view``.
  MXFP8 operands must both be E4M3 (torch accepts no E5M2 in the MX recipe).
* Scales ``float8_e4m3fn`` (NVFP4) or ``float8_e8m0fnu`` (MX), contiguous, holding
  ``round_up(rows, 128) · round_up(K/bs, 4)`` bytes in cuBLAS's blocked layout (below).
* NVFP4's per-tensor factor ``α = amax_a·amax_b/7225344`` is not passed (torch's
  single-scale recipe); it is applied to the fp32 result afterwards, as the emulation does.

**The blocked ("32_4_4") scale layout.** Pad the ``[rows, cols]`` scale matrix with zeros to
``[128·R, 4·C]``. Tile it into 128×4 blocks; blocks are stored one after another in row-major
block order, 512 bytes each. Inside a block, row ``r`` (0..127) and column ``c`` (0..3) go to
byte ``(r mod 32)·16 + (r div 32)·4 + c``: the four 32-row quarters of the block are
interleaved so that one 16-byte vector holds the 4 scales of 4 rows 32 apart. In full::

    offset(r, c) = ((r div 128)·C + c div 4)·512 + (r mod 32)·16 + ((r mod 128) div 32)·4 + c mod 4

Consumer Blackwell (12.x) has the same block-scaled MMA (``mma ... block_scale``) and cuBLAS
ships block-scaled kernels for it (TN only); every check here is ``major in (10, 11, 12)``,
never ``== 10``. A refused call (old torch, cuBLAS without the kernel, E5M2) falls back to the
emulation and says so through ``note_path``; strict mode raises instead.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from ..backend import KernelUnsupported
from ..gemm import gemm_factor
from ..tensor import QFormat, QuantizedTensor
from ._utils import device_capability

__all__ = [
    "NATIVE_MAJORS",
    "has_native_block_scaling",
    "native_operands",
    "scaled_mm_native",
    "swizzle_offsets",
    "swizzle_scales",
    "unswizzle_scales",
]

log = logging.getLogger(__name__)
NATIVE_MAJORS = (10, 11, 12)          # datacenter (10.x, 11.x Thor) and consumer (12.x)
_BLOCK = {QFormat.NVFP4: 16, QFormat.MXFP4: 32, QFormat.MXFP8_E4M3: 32}
_OUT_PLAN: dict[tuple, torch.dtype] = {}
_ERRORS = (RuntimeError, ValueError, NotImplementedError, TypeError)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def swizzle_offsets(rows: int, cols: int, device=None) -> torch.Tensor:
    """Reference index map: int64 ``[rows, cols]`` byte offset of each scale in the blocked
    layout, straight from the formula in the module docstring."""
    r = torch.arange(rows, device=device)[:, None]
    c = torch.arange(cols, device=device)[None, :]
    n_col_blocks = _ceil(cols, 4)
    block = (r // 128) * n_col_blocks + c // 4
    return block * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


def swizzle_scales(scale: torch.Tensor) -> torch.Tensor:
    """``[rows, cols]`` scales (any 1-byte dtype) to the flat blocked layout cuBLAS reads:
    ``round_up(rows, 128) · round_up(cols, 4)`` bytes, zero padding, same dtype."""
    rows, cols = scale.shape
    n_r, n_c = _ceil(rows, 128), _ceil(cols, 4)
    raw = scale.view(torch.uint8) if scale.element_size() == 1 else scale
    padded = raw.new_zeros((128 * n_r, 4 * n_c))
    padded[:rows, :cols] = raw
    # [row block, quarter q, row in quarter i, col block, col j] -> [row block, col block, i, q, j]
    tiles = padded.view(n_r, 4, 32, n_c, 4).permute(0, 3, 2, 1, 4)
    flat = tiles.contiguous().view(-1)
    return flat.view(scale.dtype) if scale.element_size() == 1 else flat


def unswizzle_scales(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`swizzle_scales`: the ``[rows, cols]`` scales back (padding dropped)."""
    n_r, n_c = _ceil(rows, 128), _ceil(cols, 4)
    raw = flat.view(torch.uint8) if flat.element_size() == 1 else flat
    tiles = raw.reshape(n_r, n_c, 32, 4, 4).permute(0, 3, 2, 1, 4)
    out = tiles.reshape(128 * n_r, 4 * n_c)[:rows, :cols].contiguous()
    return out.view(flat.dtype) if flat.element_size() == 1 else out


def native_operands(q: QuantizedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(operand, swizzled scales)`` of one side in the dtypes torch's block-scaled GEMM takes
    (a view of the codes, no copy; the scales re-laid out)."""
    if q.fmt not in _BLOCK:
        raise KernelUnsupported(f"{q.fmt.value} has no native block-scaled GEMM "
                                "(MXFP8 needs E4M3 on both sides)")
    if q.block != (1, _BLOCK[q.fmt]) and not (q.fmt == QFormat.NVFP4 and q.block == (16, 16)):
        raise KernelUnsupported(f"{q.fmt.value} with block {q.block}")
    if q.expanded:                  # bf16 value·block_scale (its scales not handed to the op)
        raise KernelUnsupported("an expanded operand: the native GEMM reads codes and scales")
    if q.fmt.is_fp4:
        if not hasattr(torch, "float4_e2m1fn_x2"):
            raise KernelUnsupported("this torch has no float4_e2m1fn_x2")
        data = q.data.view(torch.float4_e2m1fn_x2)
    else:
        data = q.data
    if q.fmt == QFormat.NVFP4:
        scale = q.scale.view(torch.float8_e4m3fn)
    else:
        if not hasattr(torch, "float8_e8m0fnu"):
            raise KernelUnsupported("this torch has no float8_e8m0fnu")
        scale = q.scale.view(torch.float8_e8m0fnu)
    return data, swizzle_scales(scale)


def has_native_block_scaling(device: torch.device) -> bool:
    """A CUDA device of compute capability 10.x/11.x/12.x and a torch with FP4 dtypes."""
    if device.type != "cuda" or not hasattr(torch, "float4_e2m1fn_x2"):
        return False
    return device_capability(device)[0] in NATIVE_MAJORS


def _call(a, sa, b, sb, fmt: QFormat, out_dtype: torch.dtype) -> torch.Tensor:
    """One block-scaled GEMM through F.scaled_mm (torch >= 2.10) or torch._scaled_mm."""
    st, sw = getattr(F, "ScalingType", None), getattr(F, "SwizzleType", None)
    if hasattr(F, "scaled_mm") and st is not None and sw is not None:
        recipe = st.BlockWise1x16 if fmt == QFormat.NVFP4 else st.BlockWise1x32
        return F.scaled_mm(a, b.t(), sa, recipe, sb, recipe, swizzle_a=sw.SWIZZLE_32_4_4,
                           swizzle_b=sw.SWIZZLE_32_4_4, output_dtype=out_dtype)
    if fmt == QFormat.MXFP4:
        raise KernelUnsupported("torch._scaled_mm has no MXFP4 recipe on CUDA (needs F.scaled_mm)")
    return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=out_dtype)


def scaled_mm_native(qa: QuantizedTensor, qb: QuantizedTensor,
                     out_dtype: torch.dtype = torch.float32,
                     apply_factor: bool = True) -> torch.Tensor:
    """``A @ Bᵀ`` on Blackwell's block-scaled tensor cores, ``[rows_a, rows_b]``.

    Asks cuBLAS for an fp32 result (then ``α`` and one rounding to ``out_dtype``, the
    emulation's arithmetic); where fp32 output is refused, bf16 (cached per format).
    Raises :class:`KernelUnsupported` when torch or cuBLAS refuse the call.
    """
    if qa.fmt != qb.fmt:
        raise KernelUnsupported(f"{qa.fmt.value} x {qb.fmt.value}: native GEMMs need one format")
    if not has_native_block_scaling(qa.device):
        raise KernelUnsupported("needs a CUDA device of compute capability 10.x-12.x")
    (a, sa), (b, sb) = native_operands(qa), native_operands(qb)
    key = (qa.fmt, qa.device)
    tries = [_OUT_PLAN[key]] if key in _OUT_PLAN else [torch.float32, torch.bfloat16]
    for plan in tries:
        try:
            y = _call(a, sa, b, sb, qa.fmt, plan)
        except _ERRORS as err:
            log.debug("block-scaled GEMM refused (%s out): %s", plan, err)
            continue
        _OUT_PLAN[key] = plan
        if apply_factor and qa.fmt == QFormat.NVFP4:
            y = y.float() * gemm_factor(qa, qb).float()
        return y.to(out_dtype)
    raise KernelUnsupported(f"torch refused the native {qa.fmt.value} block-scaled GEMM")
