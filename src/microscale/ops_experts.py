"""Expert weights ``w [E, N, K]`` quantized for the grouped (MoE) GEMMs: every expert exactly as
``ms.Linear`` quantizes its own weight (its own amax, 2D tiles, seeds), stacked ``[E, ...]`` as
:class:`microscale.ops_grouped.GroupedQ` operands.

Two ways, the same bits:

* **one call per expert** (the loop): any format, SR seeds per expert, delayed-scaling scales;
* **one call per view for all experts** (:func:`_experts_stacked`), where every scale is per
  block (FP8 blockwise, MXFP8, MXFP4 without the RHT or SR; NVFP4 through the per-segment
  kernel of ``kernels/quant_nvfp4_grouped.py``, which keeps one global amax per expert) and no
  block crosses from one expert into the next: the row view quantizes ``w`` as ``[E·N, K]``,
  the column view the experts' transposes as ``[E·K, N]``. At the moe-1b model (24 layers, 16
  experts) the loop was 768 quantizer launches a step plus the stacking copies (session 15
  profile, H100).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .backend import _interpreting, note_path, triton_available, wants_kernel
from .ops import quantize_views
from .op_specs import parse_view_spec, view_spec
from .ops_grouped import GroupedQ, _spec
from .tensor import QFormat, transpose_tile_scales

__all__ = ["quantize_experts", "quantize_experts_one_view", "quantize_nvfp4_experts",
           "transpose_experts"]


def quantize_experts(w: Tensor, row, col, backend: str, seeds: Tensor | None = None,
                     scales: tuple = (None, None)):
    """Row (along K) and column (along N) views of every expert weight ``w [E, N, K]``, each
    expert quantized alone by the per-tensor ops (its own amax and 2D tiles, exactly as
    ``ms.Linear`` quantizes its weight); stacked ``[E, ...]``. ``scales``: delayed-scaling
    scales ``[E]`` per view, or None. Formats whose scales are all per block (FP8 blockwise,
    MX), and NVFP4 where its per-segment kernel runs, go through :func:`_experts_stacked`:
    one call per view for all experts, same bits. The block-local formats' ``amax`` is
    zeros on every path, as ``quant.grouped.quantize_segments`` returns it for tokens: no GEMM
    of theirs takes a per-tensor factor, and measuring it cost a pass over the fp32 masters."""
    if _stackable(w, row, col, scales, backend):
        return _experts_stacked(w, row, col, backend)
    per = []
    for e in range(w.shape[0]):                    # E is static: no host sync
        views = [None if v is None else (v[0], dict(v[1])) for v in (row, col)]
        for v, given in zip(views, scales):
            if v is not None and v[1].get("stochastic"):
                v[1]["seed"] = seeds.reshape(-1)[e:e + 1]
            if v is not None and given is not None:
                v[1]["scale"] = given[e]
        per.append(quantize_views(w[e], *views, backend))
    out = []
    for i, v in enumerate((row, col)):
        if v is None:
            out.append(None)
            continue
        qs = [p[i] for p in per]
        amax = torch.zeros(len(qs), dtype=torch.float32, device=w.device) \
            if v[0] in _BLOCK_LOCAL else torch.stack([q.amax.reshape(()) for q in qs])
        out.append(GroupedQ(v[0], _spec(*v), torch.stack([q.data for q in qs]),
                            torch.stack([q.scale for q in qs]), amax))
    return tuple(out)


_BLOCK_LOCAL = (QFormat.FP8_BLOCK, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2, QFormat.MXFP4)
_PER_EXPERT_OPTS = ("stochastic", "rht", "scale", "amax", "rand_bits", "seed", "generator")


def quantize_experts_one_view(w: Tensor, view, backend: str):
    """W's row view and Wᵀ's from one quantization: every expert's ``[N, K]`` with 16×16 NVFP4
    tiles written expanded (bf16 ``value · tile_scale``), and the column view its experts'
    transposes, a view of the same data (:func:`transpose_experts`; SPEC §3: a 16×16-tiled
    quantization commutes with the transpose), as ``nn.function``'s one weight view does for
    a dense layer."""
    fmt, opts = view
    q_w = quantize_experts(w, (fmt, {**opts, "expand": True}), None, backend)[0]
    return q_w, transpose_experts(q_w)


def transpose_experts(q: GroupedQ) -> GroupedQ:
    """The experts' transposes of an expanded 16×16-tiled ``q`` (data ``[E, N, K]``): data a
    transposed view ``[E, K, N]``, tile scales transposed like the codes', the same amaxes."""
    if q.data.dtype != torch.bfloat16 or not q.spec.startswith("nvfp4,16,16,"):
        raise ValueError(f"transpose_experts: an expanded NVFP4 16x16 operand, got {q.spec} "
                         f"{q.data.dtype}")
    return GroupedQ(q.fmt, q.spec, q.data.transpose(1, 2), transpose_tile_scales(q.scale, 16),
                    q.amax)


def _stackable(w: Tensor, row, col, scales: tuple, backend: str = "reference") -> bool:
    """Whether quantizing ``w [E, N, K]`` as one ``[E·N, K]`` matrix (and its transpose as
    ``[E·K, N]``) gives every expert's own views: only per-block scales (no per-tensor amax;
    NVFP4's per-expert amax where its per-segment kernel runs), no seeds, no given scales,
    and no block crossing from one expert into the next."""
    if any(s is not None for s in scales):
        return False
    for v, inner_rows in ((row, w.shape[1]), (col, w.shape[2])):
        if v is None:
            continue
        fmt, opts = v
        if any(opts.get(k) for k in _PER_EXPERT_OPTS):
            return False
        if fmt == QFormat.NVFP4:
            # the kernel checks nothing, as the grouped layer asks (check_finite=False), and
            # writes codes, or a row view expanded; anything else keeps the loop
            if not (_kernels_run(w, backend) and inner_rows % 16 == 0
                    and opts.get("check_finite") is False
                    and not (opts.get("expand") and v is col)):
                return False
            continue
        if fmt not in _BLOCK_LOCAL:
            return False
        block_rows = tuple(opts.get("block", (1, 128)))[0] if fmt == QFormat.FP8_BLOCK else 1
        if inner_rows % block_rows:
            return False
    return True


def _kernels_run(w: Tensor, backend: str) -> bool:
    """Whether the expert-weight kernels run here (the per-segment NVFP4 kernel, the FP8 and
    MXFP8 pair kernels): Triton installed, CUDA or the interpreter, a backend that asks for
    kernels; else the loop or the per-view calls."""
    return wants_kernel(backend, w.device) and triton_available() and \
        (w.device.type == "cuda" or _interpreting())


def _nvfp4_stacked(x2: Tensor, rows: int, n_experts: int, opts: dict):
    """The NVFP4 view of ``x2 [E·rows, cols]`` (row form), each expert's ``rows`` with its own
    global amax: one per-segment kernel call (``quant_nvfp4_grouped``), 16x16 tiles or 1x16,
    as the op :func:`quantize_nvfp4_experts` (traced code never calls the kernel itself)."""
    return torch.ops.microscale.quantize_nvfp4_experts(x2, rows, n_experts,
                                                       bool(opts.get("block_2d")),
                                                       bool(opts.get("expand")))


@torch.library.custom_op("microscale::quantize_nvfp4_experts", mutates_args=())
def quantize_nvfp4_experts(x2: Tensor, rows: int, n_experts: int, two_d: bool,
                           expand: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """``(codes uint8 [E·rows, cols/2], E4M3 scales [E·rows, cols/16], amax fp32 [E])`` of the
    stacked experts ``x2``, expert e owning rows ``[e·rows, (e+1)·rows)``; ``expand``: bf16
    ``value · block_scale [E·rows, cols]`` in place of the codes."""
    from .kernels.quant_nvfp4_grouped import quantize_nvfp4_segments_triton
    seg = torch.arange(x2.shape[0], device=x2.device, dtype=torch.int32) // rows
    note_path("quantize_experts", "nvfp4", "triton per-segment kernel (quant_nvfp4_grouped): "
              "every expert in one call, each with its own amax"
              + (", written expanded" if expand else ""))
    return quantize_nvfp4_segments_triton(x2, seg, n_experts, False, False, None, two_d, expand)


@quantize_nvfp4_experts.register_fake
def _(x2, rows, n_experts, two_d, expand=False):
    r, c = x2.shape
    return (x2.new_empty((r, c), dtype=torch.bfloat16) if expand else
            x2.new_empty((r, c // 2), dtype=torch.uint8),
            x2.new_empty((r, c // 16), dtype=torch.float8_e4m3fn),
            x2.new_empty((n_experts,), dtype=torch.float32))


# TILE_TRANSPOSE: FP8 128x128 experts' column view as the row view transposed (off: quantized
# again from a transposed copy of w, the same bits; bench label @grp-fp8-w-requant).
# PAIR_KERNEL: both views from one read of w in the register pair kernel, Wᵀ written per
# expert (quant_fp8.weight_pairs_experts), where it runs; off (or where it does not): the row
# view, then its bytes transposed (a 1-byte transposing copy: 1.6 ms at DeepSeek-V3's 8 x 4096
# x 7168 experts on an H100, eager). Session 23; the same bits.
CONFIG = {"TILE_TRANSPOSE": True, "PAIR_KERNEL": True}


def _fp8_pair_kernel(w: Tensor, opts: dict, backend: str) -> bool:
    """Whether :func:`quantize_fp8_experts_pair` runs here: the register kernel's 128x128 pair
    (power-of-two scales, N and K multiples of 128), Triton on CUDA or the interpreter, a
    backend that asks for kernels."""
    from .kernels.quant_fp8 import CONFIG as FP8_CONFIG
    return CONFIG["PAIR_KERNEL"] and _kernels_run(w, backend) and opts.get("pow2_scales", True) \
        and FP8_CONFIG["W128"] == "reg" and w.shape[1] % 128 == 0 and w.shape[2] % 128 == 0 \
        and w.shape[1] > 0


def _mx_pair_kernel(w: Tensor, row, col, backend: str) -> bool:
    """Whether :func:`quantize_mx_experts_pair` runs here: MXFP8 both ways without RHT, the
    register pair kernel on (``quant_mx.CONFIG["ROWCOL"]``), N a multiple of its tile rows,
    E·N and K of 128, Triton on CUDA or the interpreter, a backend that asks for kernels."""
    from .kernels.quant_mx import CONFIG as MX_CONFIG
    return CONFIG["PAIR_KERNEL"] and row[0].is_mx8 and col[0].is_mx8 \
        and not (row[1].get("rht") or col[1].get("rht") or col[1].get("expand")) \
        and _kernels_run(w, backend) and MX_CONFIG["ROWCOL"] == "reg" \
        and w.shape[1] % MX_CONFIG["BR_reg"] == 0 and w.shape[0] * w.shape[1] % 128 == 0 \
        and w.shape[2] % 128 == 0 and w.shape[1] > 0


@torch.library.custom_op("microscale::quantize_mx_experts_pair", mutates_args=())
def quantize_mx_experts_pair(w2: Tensor, n_experts: int, row_spec: str, col_spec: str
                             ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """MXFP8 W ``[E·N, K]`` (codes, or bf16 ``value · 2^k`` if its view says ``"expand"``)
    and per-expert Wᵀ codes ``[E, K, N]`` of stacked experts ``w2``, with their UE8M0 scale
    bytes (``[E·N, K/32]``, ``[E, K, N/32]``), from one kernel call
    (:func:`~microscale.kernels.quant_mx.mx_pairs_experts`)."""
    from .kernels.quant_mx import mx_pairs_experts
    row, col = parse_view_spec(row_spec), parse_view_spec(col_spec)
    expand = bool(row[1].pop("expand", False))
    note_path("quantize_experts", row[0].value, "triton register pair kernel: W"
              + (" (expanded)" if expand else "") + " and every expert's Wᵀ from one read "
              "(CONFIG['PAIR_KERNEL'])")
    (wd, ws), (td, ts) = mx_pairs_experts(w2, n_experts, row, col, expand)
    return wd, ws, td, ts


@quantize_mx_experts_pair.register_fake
def _(w2, n_experts, row_spec, col_spec):
    r, c = w2.shape
    n = r // n_experts
    (rf, ro), (cf, _) = parse_view_spec(row_spec), parse_view_spec(col_spec)
    dt = {QFormat.MXFP8_E4M3: torch.float8_e4m3fn, QFormat.MXFP8_E5M2: torch.float8_e5m2}
    return (w2.new_empty((r, c), dtype=torch.bfloat16 if ro.get("expand") else dt[rf]),
            w2.new_empty((r, c // 32), dtype=torch.uint8),
            w2.new_empty((n_experts, c, n), dtype=dt[cf]),
            w2.new_empty((n_experts, c, n // 32), dtype=torch.uint8))


@torch.library.custom_op("microscale::quantize_fp8_experts_pair", mutates_args=())
def quantize_fp8_experts_pair(w2: Tensor, n_experts: int, e5m2: bool
                              ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """FP8 128x128 W ``[E·N, K]`` and per-expert Wᵀ ``[E, K, N]`` of stacked experts ``w2``,
    with their fp32 tile ``scale_inv`` (``[E·N/128, K/128]``, ``[E, K/128, N/128]``), from one
    kernel call (:func:`~microscale.kernels.quant_fp8.weight_pairs_experts`)."""
    from .kernels.quant_fp8 import weight_pairs_experts
    opts = {"block": (128, 128), "pow2_scales": True,
            "fp8_dtype": torch.float8_e5m2 if e5m2 else torch.float8_e4m3fn}
    note_path("quantize_experts", "fp8_block", "triton register pair kernel: W and every "
              "expert's Wᵀ from one read (CONFIG['PAIR_KERNEL'])")
    (qw, sw), (qt, st) = weight_pairs_experts(w2, n_experts, opts)
    return qw, sw, qt, st


@quantize_fp8_experts_pair.register_fake
def _(w2, n_experts, e5m2):
    r, c = w2.shape
    n, dt = r // n_experts, torch.float8_e5m2 if e5m2 else torch.float8_e4m3fn
    return (w2.new_empty((r, c), dtype=dt), w2.new_empty((r // 128, c // 128), dtype=torch.float32),
            w2.new_empty((n_experts, c, n), dtype=dt),
            w2.new_empty((n_experts, c // 128, n // 128), dtype=torch.float32))


def _tile_transpose(row, col) -> bool:
    """Whether the column view is exactly the row view transposed: the same FP8 128×128
    quantization on both (a row view ``[N, K]`` of tiles, their transposes for ``[K, N]``)."""
    return CONFIG["TILE_TRANSPOSE"] and row[0] == col[0] == QFormat.FP8_BLOCK \
        and row[1] == col[1] \
        and tuple(row[1].get("block", (1, 128))) == (128, 128)


def _experts_stacked(w: Tensor, row, col, backend: str):
    """:func:`quantize_experts` for block-local formats: the row view of ``w`` as ``[E·N, K]``
    and the column view as the row view of the experts' transposes ``[E·K, N]`` (a bf16
    transposing copy), two quantizer calls in all instead of one per expert. Blocks never
    straddle experts (``_stackable``), so each expert's codes and scales are its own call's;
    ``amax [E]`` zeros for the block-local formats (NVFP4: each expert's, from its kernel).

    FP8 128×128 tiles on both views (``fp8_blockwise``'s weights): the column view is the
    row view's codes and tile scales transposed (SPEC §8, exact): both written by one kernel
    call where it runs (:func:`quantize_fp8_experts_pair`), else a 1-byte transposing copy,
    instead of a transposed copy of ``w`` and a second quantization."""
    E, N, K = w.shape
    if row is not None and col is not None and _tile_transpose(row, col) \
            and _fp8_pair_kernel(w, row[1], backend):
        qw, sw, qt, st = torch.ops.microscale.quantize_fp8_experts_pair(
            w.reshape(E * N, K), E, row[1].get("fp8_dtype", torch.float8_e4m3fn) ==
            torch.float8_e5m2)
        amax, spec = w.new_zeros(E, dtype=torch.float32), _spec(*row)
        return (GroupedQ(row[0], spec, qw.reshape(E, N, K), sw.reshape(E, N // 128, -1), amax),
                GroupedQ(col[0], spec, qt, st, amax))
    if row is not None and col is not None and _mx_pair_kernel(w, row, col, backend):
        wd, ws, td, ts = torch.ops.microscale.quantize_mx_experts_pair(
            w.reshape(E * N, K), E, view_spec(*row), view_spec(*col))
        zeros = w.new_zeros(E, dtype=torch.float32)
        return (GroupedQ(row[0], _spec(*row), wd.reshape(E, N, K), ws.reshape(E, N, -1), zeros),
                GroupedQ(col[0], _spec(*col), td, ts, zeros.clone()))
    out = []
    for v, x2, rows in ((row, lambda: w.reshape(E * N, K), N),
                        (col, lambda: w.transpose(1, 2).reshape(E * K, N), K)):
        if v is None:
            out.append(None)
            continue
        if v is col and out[0] is not None and _tile_transpose(row, col):
            q = out[0]
            out.append(GroupedQ(q.fmt, q.spec, q.data.transpose(1, 2).contiguous(),
                                q.scale.transpose(1, 2).contiguous(), q.amax))
            continue
        if v[0] == QFormat.NVFP4:                 # per-expert amax inside the kernel
            data, scale, amax = _nvfp4_stacked(x2(), rows, E, v[1])
        else:
            q = quantize_views(x2(), v, None, backend)[0]
            data, scale, amax = q.data, q.scale, w.new_zeros(E, dtype=torch.float32)
        out.append(GroupedQ(v[0], _spec(*v), data.reshape(E, rows, data.shape[-1]),
                            scale.reshape(E, -1, scale.shape[-1]), amax))
    return tuple(out)
