"""Many MXFP8 weights quantized in one launch: every W / Wᵀ pair of a model at once.

An MXFP8 layer needs two quantizations of its fp32 master W ``[N, K]`` each optimizer step:
W for fprop (1x32 blocks along K) and Wᵀ for dgrad (1x32 blocks along N, stored ``[K, N]``):
not one transpose of the other, as FP8 128×128 tiles are, but the row and the column view of
one read (SPEC §7), which ``quant_rowcol_reg``'s register pair kernel writes. One launch per
weight costs a launch and a tail per tensor (a 768×768 pair: ~7 µs on an H100 for ~1 µs of
bytes; 120 of them, ~1.0 ms of a 125m mxfp8 step, session 29), and on Hopper the GEMMs then
decode both views to bf16 again on every use (another ~0.5 ms). Here one persistent launch
walks the ``[32, 128]`` tiles of *all* the weights through the same tables as the FP8 many
kernel (``quant_many.tables``: tensor index, row0, col0 per tile; each tensor's address,
shape and flat output offsets), each tile by the pair kernel's own tile code
(``quant_rowcol_reg.mx8_tile``), so the bytes are those of ``quantize_rowcol`` tensor by
tensor.

Outputs, flat, tensor after tensor (``ops_many.flat_offsets`` with one scale per 1×32 block):
W's data ``[N, K]`` and scale bytes ``[N, K/32]``, Wᵀ's data ``[K, N]`` and scale bytes
``[K, N/32]``, ``amax[n]``. The data are E4M3/E5M2 codes, or with the views' ``expand``
option bf16 ``value · 2^k`` (``mx8_expanded``: what the Hopper GEMMs would decode them to, so
neither GEMM runs a dequantize pass; 2 bytes an element each instead of 1 + 1/32). Rows and
columns must be multiples of 128 (the pair kernel's shapes) and inputs 16-byte aligned; other
weights go one by one.

Measured (H200, session 45, graph-replayed 125m steps): 0.31 ms for the model's 120 pairs,
expanded, against 0.84 ms of per-layer pair kernels and 0.55 ms of GEMM-side decodes; 125m
mxfp8 0.826-0.831x -> 0.843-0.847x of bf16. Without the kernel's alignment statements (see
:func:`mx8_many_kernel`) Triton chose another register layout: 2.25 ms, and on the GPU other
bits than the per-tensor kernel for a weight holding a NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, register_kernel
from ..ops_many import flat_offsets
from ..tensor import QFormat
from ._utils import IN_DTYPE_CODE, check_kernel_input, persistent_grid
from .quant_many import aligned_tile, check_inputs, tables
from .quant_mx import _ELEM
from .quant_mx import CONFIG as MX_CONFIG
from .quant_rowcol_reg import _load_tile, mx8_tile

__all__ = ["quantize_rowcol_many_mx8_triton", "CONFIG"]

# the pair kernel's tile and warps (quant_mx.CONFIG's BR_reg / num_warps_reg defaults: [32, 128]
# with 2 warps); programs an SM as its PROGS_PER_SM_reg
CONFIG = {"BR": 32, "num_warps": 2, "PROGS_PER_SM": MX_CONFIG["PROGS_PER_SM_reg"]}


@triton.jit
def mx8_many_kernel(x0_ptr, x0_addr, tab_ptr, tile_ptr, qr_ptr, sr_ptr, qc_ptr, sc_ptr, amax_ptr,
                    n_tiles, ELEM: tl.constexpr, CEIL: tl.constexpr, NAN_SEL: tl.constexpr,
                    EXPAND: tl.constexpr, IN_DTYPE: tl.constexpr, X_BYTES: tl.constexpr,
                    BR: tl.constexpr):
    """``[BR, 128]`` tiles of many tensors: W's and Wᵀ's MXFP8 views (both codes, or both
    expanded), each tensor's amax by atomic max. The tables read by ``quant_many.aligned_tile``
    with what the launch checked (:func:`_check`: 16-byte aligned inputs, whole 128x128
    tiles; a tensor's scale bytes ``rows · cols / 32``, a multiple of 512), so loads and
    stores vectorize."""
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        i, x_ptr, rows, cols, q_off, s_off, r0, c0 = aligned_tile(
            x0_ptr, x0_addr, tab_ptr, tile_ptr, t, X_BYTES, BR, 512)
        x, nan, offs = _load_tile(x_ptr, r0, c0, cols, 4, None, 0, IN_DTYPE, BR)
        acc = mx8_tile(x, nan, offs, tl.zeros((BR // 4, 4), dtype=tl.float32), r0, c0, cols,
                       rows, qr_ptr + q_off, sr_ptr + s_off, qc_ptr + q_off, sc_ptr + s_off,
                       ELEM, CEIL, ELEM, CEIL, NAN_SEL, EXPAND, EXPAND, BR, 128, True, True)
        # relaxed: read only after the kernel, no fence a tile
        tl.atomic_max(amax_ptr + i, tl.max(tl.max(acc, axis=1), axis=0), sem="relaxed")


def _check(xs: list[torch.Tensor], row, col) -> tuple[QFormat, bool, bool]:
    """``(format, ceil scales, expanded)`` of a supported call, else KernelUnsupported."""
    if not xs:
        raise KernelUnsupported("no tensors")
    if row is None or col is None or row != col or not row[0].is_mx8:
        raise KernelUnsupported("MXFP8 row and column views with the same options")
    unknown = set(row[1]) - {"scale_rounding", "check_finite", "expand"}
    if unknown:
        raise KernelUnsupported(f"options {sorted(unknown)}")
    rounding = row[1].get("scale_rounding", "ceil")
    if rounding not in ("ceil", "floor"):
        raise KernelUnsupported(f"scale_rounding={rounding!r}")
    check_inputs(xs, 128)
    for x in xs:
        check_kernel_input(x)
        if x.data_ptr() % 16:
            raise KernelUnsupported("an input not 16-byte aligned")
    return row[0], rounding == "ceil", bool(row[1].get("expand", False))


def quantize_rowcol_many_mx8_triton(xs: list[torch.Tensor], row, col) -> list[torch.Tensor]:
    """Kernel twin of ``ops_many.rowcol_many_reference`` for MXFP8 pairs: the flat outputs
    ``[data W, scales W, data Wᵀ, scales Wᵀ, amax]``."""
    fmt, ceil, expand = _check(xs, row, col)
    br = CONFIG["BR"]
    _, _, nq, ns = flat_offsets([x.shape for x in xs], (1, 32))
    dev = xs[0].device
    tab, tiles = tables(xs, (br, 128), (1, 32))
    dt = torch.bfloat16 if expand else torch.uint8
    qr, qc = (torch.empty(nq, dtype=dt, device=dev) for _ in range(2))
    sr, sc = (torch.empty(ns, dtype=torch.uint8, device=dev) for _ in range(2))
    amax = torch.zeros(len(xs), dtype=torch.float32, device=dev)
    n_tiles = tiles.shape[0]
    grid = (persistent_grid(n_tiles, dev, CONFIG["PROGS_PER_SM"]),)
    x0 = xs[0]
    mx8_many_kernel[grid](x0, x0.data_ptr(), tab, tiles, qr, sr, qc, sc, amax, n_tiles,
                          _ELEM[fmt], ceil, MX_CONFIG["NAN_SEL"], expand, IN_DTYPE_CODE[x0.dtype],
                          x0.element_size(), br, num_warps=CONFIG["num_warps"])
    if not expand:
        codes = torch.float8_e4m3fn if fmt == QFormat.MXFP8_E4M3 else torch.float8_e5m2
        qr, qc = qr.view(codes), qc.view(codes)
    return [qr, sr, qc, sc, amax]


for _fmt in (QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2):
    register_kernel("quantize_rowcol_many", f"{_fmt.value}|{_fmt.value}")(
        quantize_rowcol_many_mx8_triton)
