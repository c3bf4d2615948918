"""Grouped (MoE) GEMMs with an fp32 result and no host synchronisation: bf16 or FP8 operands.

Two shapes of grouping, both with the group *ends* ``offs [E]`` (int, cumulative, on the device;
group e spans ``[offs[e-1], offs[e])``, ``offs[-1]`` may stop short of the full extent)::

    "tokens":  a [R, K] rows grouped, b [E·N, K]   ->  y [R, N],     y[g_e] = a[g_e] · b_eᵀ
               (bf16 b may also come as [E, N, K] with any strides, e.g. the transposed view
               [E, K, N]ᵀ of one expanded 16×16 expert weight, read in place)
    "reduce":  a [M, Kb], b [N, Kb], K grouped      ->  y [E, M, N],  y[e] = a[:, g_e] · b[:, g_e]ᵀ

(fprop and dgrad of an expert layer are "tokens", wgrad is "reduce"). Rows of a "tokens" result
past ``offs[-1]`` and the result of an empty "reduce" group are exact zeros.

**FP8 operands** (E4M3/E5M2 codes, any pairing) carry DeepSeek-V3 block scales, fp32
``scale_inv`` per row block and 128-wide K chunk: ``sa [R/br_a, K/128]``, ``sb [rows_b/br_b,
K/128]`` with ``br`` 1 (1×128 activations and gradients) or 128 (128×128 weight tiles)::

    y[m, n] = Σ_kb  sa[m/br_a, kb] · sb[n_b/br_b, kb] · Σ_{k in chunk kb} a[m, k] · b[n_b, k]

The inner sum runs on the FP8 tensor cores (fp32 accumulation) one 128-wide chunk at a time and
is scaled before it joins the total, as the dense kernel in ``gemm_fp8.py`` does; ``kb`` is the
global chunk index, so "reduce" groups must start at multiples of 128 (the padded column views
the grouped quantizer writes do). **bf16 operands** (block-scaled values already multiplied
out, exact in bf16) go through the bf16 tensor cores with fp32 accumulation. Either way every
product is exact in fp32 and the result equals :func:`grouped_gemm_reference` up to the order
of the fp32 additions.

**Schedule without the group sizes on the host**: ``gemm_grouped_tiles.py``.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, _interpreting
from ._utils import cdiv, round_to_input_dtype
from .gemm_fp8 import _interpreter_f32
from .gemm_grouped_tiles import reduce_tile, tokens_tile

__all__ = ["CONFIG", "grouped_gemm", "grouped_gemm_reference", "uses_tma"]

# Tiles per operand kind and mode, from the sweep at the moe-1b expert GEMMs (H100, session 15,
# benchmarks/bench_grouped_sweep.py; ratios to bf16 torch._grouped_mm of the same problem):
# bf16 128x256, 8 warps, 3 stages ran 1.42-2.63x (128x128: 1.34-2.49x); FP8 "tokens" 128x64,
# 4 warps, 4 stages 1.12-1.30x (128x128, 8 warps: 0.98-1.13x: 255 registers, spills); FP8
# "reduce" 64x128, 4 warps, 4 stages 1.53-2.06x (128x128, 8 warps: 0.88-1.10x). A config
# whose pipeline needs more shared memory than the device has falls back to SMALL_SMEM.
# "*_tma": the FP8 kernels reading their operands through TMA descriptors (gemm_grouped_tma),
# taken where ``TMA`` is on (MICROSCALE_GROUPED_TMA=0 turns it off; a call's config "TMA") and
# the operands are 16-byte aligned. From the sweep at issue 18's and moe-1b's GEMMs (H100,
# session 23, bench_grouped_sweep.py): "tokens" 128x128 with 8 warps where an expert's output
# is large (rows per expert x N >= TMA_BIG: DeepSeek-V3's layers, 551-631 TF/s against 503-532
# with pointer loads), else 128x64 with 4 warps (Qwen3, moe-1b: 1.3-1.6x bf16, +3-10%);
# "reduce" 128x64 with 4 warps everywhere (+12-35% over the pointer kernel's 64x128).
CONFIG = {"bf16": {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3},
          "fp8": {"BM": 128, "BN": 64, "BK": 128, "num_warps": 4, "num_stages": 4},
          "fp8_reduce": {"BM": 64, "BN": 128, "BK": 128, "num_warps": 4, "num_stages": 4},
          "fp8_tma": {"BM": 128, "BN": 128, "BK": 128, "num_warps": 8, "num_stages": 4},
          "fp8_tma_small": {"BM": 128, "BN": 64, "BK": 128, "num_warps": 4, "num_stages": 4},
          "fp8_reduce_tma": {"BM": 128, "BN": 64, "BK": 128, "num_warps": 4, "num_stages": 4}}
TMA = os.environ.get("MICROSCALE_GROUPED_TMA", "1") == "1"
TMA_BIG = 1 << 23
SMALL_SMEM = {"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}   # 96 KB bf16
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_MODES = ("tokens", "reduce")


@triton.jit
def _operand(ptr, rows, rmask, cols, cmask, stride, FP8: tl.constexpr, E5M2: tl.constexpr,
             DOT_F32: tl.constexpr, stride_c):
    """A [len(rows), len(cols)] tile as the dot's operand (fp8 codes bit-cast; fp32 in the
    interpreter, whose tl.dot reads bf16 as integers and fp8 NaN codes as numbers)."""
    t = tl.load(ptr + rows.to(tl.int64)[:, None] * stride + cols[None, :] * stride_c,
                mask=rmask[:, None] & cmask[None, :], other=0)
    if FP8:
        raw = t
        t = t.to(tl.float8e5 if E5M2 else tl.float8e4nv, bitcast=True)
        if DOT_F32:
            t = _interpreter_f32(t, raw, E5M2)
    elif DOT_F32:
        t = t.to(tl.float32)
    return t


@triton.jit
def _mainloop(a_ptr, b_ptr, sa_ptr, sb_ptr, offs_m, mmask, b_rows, nmask, k_lo, k_hi,
              stride_a, stride_b, stride_sa, stride_sb, BR_A: tl.constexpr, BR_B: tl.constexpr,
              FP8: tl.constexpr, A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr, BK: tl.constexpr, B_TILE_SCALE: tl.constexpr,
              DOT_F32: tl.constexpr, b_data_rows, stride_bk):
    """fp32 ``Σ_k a[offs_m, k] · b[b_rows, k]`` over ``k_lo <= k < k_hi``, scaled per chunk.
    ``B_TILE_SCALE``: the tile's ``b_rows`` lie in one scale block of b (128×128 weight
    tiles, BN dividing 128, experts' rows a multiple of 128): one scalar ``sb`` a chunk, so
    the chunk is scaled by one multiply-add an element instead of an outer product.
    ``b_data_rows`` / ``stride_bk``: b's data rows from ``b_ptr`` and its K stride (a bf16
    expert's ``[N, K]`` read through any strides from its own base; else ``b_rows``, 1)."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        offs_k = k0 + tl.arange(0, BK)
        kmask = offs_k < k_hi
        a = _operand(a_ptr, offs_m, mmask, offs_k, kmask, stride_a, FP8, A_E5M2, DOT_F32, 1)
        b = _operand(b_ptr, b_data_rows, nmask, offs_k, kmask, stride_b, FP8, B_E5M2, DOT_F32,
                     stride_bk)
        if FP8:
            acc = add_scaled_chunk(acc, tl.dot(a, tl.trans(b)), sa_ptr, sb_ptr, offs_m, mmask,
                                   b_rows, nmask, k0 // BK, stride_sa, stride_sb, BR_A, BR_B,
                                   B_TILE_SCALE)             # BK == 128: one chunk a step
        else:
            acc = tl.dot(a, tl.trans(b), acc)
    return acc


@triton.jit
def add_scaled_chunk(acc, part, sa_ptr, sb_ptr, offs_m, mmask, b_rows, nmask, kb, stride_sa,
                     stride_sb, BR_A: tl.constexpr, BR_B: tl.constexpr,
                     B_TILE_SCALE: tl.constexpr):
    """``acc + sa · sb · part`` for chunk ``kb``'s fp32 sum ``part``; masked rows and columns
    take scale 0."""
    sa = tl.load(sa_ptr + (offs_m // BR_A) * stride_sa + kb, mask=mmask, other=0.0)
    if B_TILE_SCALE:
        sb0 = tl.load(sb_ptr + (tl.min(b_rows) // BR_B) * stride_sb + kb)
        return acc + part * (sa * sb0)[:, None]
    sb = tl.load(sb_ptr + (b_rows // BR_B) * stride_sb + kb, mask=nmask, other=0.0)
    return acc + part * sa[:, None] * sb[None, :]


@triton.jit
def tokens_epilogue(acc, y_ptr, f_ptr, group, E, offs_m, mmask, offs_n, nmask, stride_y,
                    HAS_F: tl.constexpr, DOT_F32: tl.constexpr):
    """The group's factor (tail rows, group E, stay exact zeros), one rounding, the store of
    the tile's own rows."""
    if HAS_F:
        f = tl.load(f_ptr + tl.minimum(tl.maximum(group, 0), E - 1))
        acc = acc * tl.where(group < E, f, 1.0)
    if DOT_F32 and y_ptr.dtype.element_ty == tl.bfloat16:
        acc = round_to_input_dtype(acc, 1)        # the interpreter's cast truncates; RNE here
    tl.store(y_ptr + offs_m.to(tl.int64)[:, None] * stride_y + offs_n[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


@triton.jit
def _tokens_kernel(a_ptr, b_ptr, y_ptr, sa_ptr, sb_ptr, offs_ptr, f_ptr, R, N, K, E,
                   stride_a, stride_be, stride_b, stride_bk, stride_y, stride_sa, stride_sb,
                   BR_A: tl.constexpr, BR_B: tl.constexpr, FP8: tl.constexpr,
                   A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr, B_TILE_SCALE: tl.constexpr,
                   DOT_F32: tl.constexpr, HAS_F: tl.constexpr):
    group, _, _, offs_m, mmask, offs_n, nmask, expert, live = tokens_tile(
        tl.program_id(0), offs_ptr, R, N, E, BM, BN)
    b_rows = expert * N + offs_n                               # the scales' rows
    k_hi = tl.where(live, K, 0)
    acc = _mainloop(a_ptr, b_ptr + expert.to(tl.int64) * stride_be, sa_ptr, sb_ptr, offs_m,
                    mmask, b_rows, nmask, 0, k_hi, stride_a, stride_b, stride_sa, stride_sb,
                    BR_A, BR_B, FP8, A_E5M2, B_E5M2, BM, BN, BK, B_TILE_SCALE, DOT_F32,
                    offs_n, stride_bk)
    tokens_epilogue(acc, y_ptr, f_ptr, group, E, offs_m, mmask, offs_n, nmask, stride_y,
                    HAS_F, DOT_F32)


@triton.jit
def _reduce_kernel(a_ptr, b_ptr, y_ptr, sa_ptr, sb_ptr, offs_ptr, M, N,
                   stride_a, stride_b, stride_y, stride_sa, stride_sb,
                   BR_A: tl.constexpr, BR_B: tl.constexpr, FP8: tl.constexpr,
                   A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr, K_ALIGN: tl.constexpr,
                   DOT_F32: tl.constexpr):
    e, k_lo, k_hi, _, _, offs_m, mmask, offs_n, nmask = reduce_tile(tl.program_id(0), offs_ptr,
                                                                    M, N, BM, BN)
    # the group bounds come from memory, so the compiler cannot see that they are multiples of
    # K_ALIGN (the caller's contract): without the hint every K load of the group is split
    # into single elements (no vector loads), which ran the FP8 wgrad at ~110 TF/s
    k_lo = tl.multiple_of(k_lo, K_ALIGN)
    k_hi = tl.multiple_of(k_hi, K_ALIGN)
    acc = _mainloop(a_ptr, b_ptr, sa_ptr, sb_ptr, offs_m, mmask, offs_n, nmask, k_lo, k_hi,
                    stride_a, stride_b, stride_sa, stride_sb, BR_A, BR_B, FP8, A_E5M2, B_E5M2,
                    BM, BN, BK, False, DOT_F32, offs_n, 1)
    tl.store(y_ptr + e.to(tl.int64) * M * N + offs_m[:, None] * stride_y + offs_n[None, :], acc,
             mask=mmask[:, None] & nmask[None, :])


# --------------------------------------------------------------------------- host side
def _check(a, b, offs, mode, sa, sb, br_a, br_b) -> bool:
    """Validate the call; True for FP8 operands."""
    if mode not in _MODES:
        raise ValueError(f"grouped_gemm: mode must be one of {_MODES}, got {mode!r}")
    b3 = b.dim() == 3 and mode == "tokens" and b.dtype not in _FP8
    if a.dim() != 2 or (b.dim() != 2 and not b3) or offs.dim() != 1:
        raise ValueError(f"grouped_gemm: a and b must be 2-D (b also 3-D [E, N, K], bf16, "
                         f"'tokens') and offs 1-D, got {tuple(a.shape)}, {tuple(b.shape)}, "
                         f"{tuple(offs.shape)}")
    if a.shape[1] != b.shape[-1]:
        raise ValueError(f"grouped_gemm: a and b must share K, got {a.shape[1]} and {b.shape[-1]}")
    if b3 and b.shape[0] != offs.numel():
        raise ValueError(f"grouped_gemm: b holds {b.shape[0]} experts, offs {offs.numel()}")
    if offs.numel() == 0 or offs.dtype not in (torch.int32, torch.int64):
        raise ValueError("grouped_gemm: offs must be a non-empty int32/int64 tensor of group ends")
    fp8 = a.dtype in _FP8
    if fp8 != (b.dtype in _FP8) or (not fp8 and a.dtype != b.dtype):
        raise ValueError(f"grouped_gemm: a and b must both be FP8 or both {a.dtype}, got "
                         f"{a.dtype} and {b.dtype}")
    if mode == "tokens" and b.dim() == 2 and b.shape[0] % offs.numel():
        raise ValueError(f"grouped_gemm: b's {b.shape[0]} rows do not split into "
                         f"{offs.numel()} experts")
    if fp8:
        _check_scales(a, b, sa, sb, br_a, br_b)
    elif sa is not None or sb is not None:
        raise ValueError("grouped_gemm: scales are for FP8 operands only")
    return fp8


def _check_scales(a, b, sa, sb, br_a, br_b) -> None:
    if sa is None or sb is None:
        raise ValueError("grouped_gemm: FP8 operands need their block scales sa and sb")
    for name, br, t, s in (("a", br_a, a, sa), ("b", br_b, b, sb)):
        if br not in (1, 128):
            raise ValueError(f"grouped_gemm: br_{name} must be 1 or 128, got {br}")
        want = (-(-t.shape[0] // br), -(-t.shape[1] // 128))
        if tuple(s.shape) != want or s.dtype != torch.float32:
            raise ValueError(f"grouped_gemm: s{name} must be fp32 {want}, got {s.dtype} "
                             f"{tuple(s.shape)}")


def grouped_gemm(a, b, offs, mode, *, sa=None, sb=None, br_a=1, br_b=1, config=None,
                 k_align=1, factor=None, out_dtype=torch.float32):
    """fp32 grouped ``a · bᵀ`` (module docstring); no host synchronisation. ``k_align``
    ("reduce"): every group end is a multiple of it (FP8: 128 always), a promise the kernel
    turns into vector loads and cannot check without reading ``offs`` (the reference does).
    "tokens" only: ``factor`` (fp32 ``[E]``) multiplies each group's rows in the epilogue
    (the fp32 sum times the factor, then one rounding to ``out_dtype``)."""
    if (factor is not None or out_dtype != torch.float32) and mode != "tokens":
        raise ValueError("grouped_gemm: factor / out_dtype are for mode='tokens'")
    fp8 = _check(a, b, offs, mode, sa, sb, br_a, br_b)
    k_align = _k_align(fp8, k_align)
    if not (a.device.type == "cuda" or _interpreting()):
        raise KernelUnsupported("the Triton grouped GEMM needs CUDA tensors or TRITON_INTERPRET=1")
    E = offs.numel()
    a = a.contiguous()
    tma = uses_tma(a, b, config)
    small = mode == "tokens" and a.shape[0] // E * (b.shape[-2] if b.dim() == 3 else
                                                    b.shape[0] // E) < TMA_BIG
    cfg = _config(fp8, mode, config, a.device, "_tma_small" if tma and small else
                  "_tma" if tma else "")
    if fp8 and cfg["BK"] != 128:
        raise ValueError("grouped_gemm: FP8 operands need BK = 128 (one scale chunk per step)")
    if b.dim() == 3:            # [E, N, K] through its strides: a transposed view stays a view
        b = b if b.stride(2) == 1 or b.stride(1) == 1 else b.contiguous()
        b_strides = b.stride()
        if (b.shape[1] - 1) * b_strides[1] + (b.shape[2] - 1) * b_strides[2] >= 2 ** 31:
            raise ValueError("grouped_gemm: a 3-D b's expert must span fewer than 2^31 "
                             "elements (the kernel's in-expert offsets are int32)")
    else:
        b = b.contiguous()
        b_strides = (b.shape[0] // E * b.stride(0), b.stride(0), 1)
    if fp8:
        sa, sb = sa.contiguous(), sb.contiguous()
        a_arg, b_arg = a.view(torch.uint8), b.view(torch.uint8)
        flags = dict(BR_A=br_a, BR_B=br_b, FP8=True, A_E5M2=a.dtype == torch.float8_e5m2,
                     B_E5M2=b.dtype == torch.float8_e5m2)
        s_strides = (sa.stride(0), sb.stride(0))
    else:
        sa = sb = a.new_zeros(1, dtype=torch.float32)
        a_arg, b_arg = a, b
        flags = dict(BR_A=1, BR_B=1, FP8=False, A_E5M2=False, B_E5M2=False)
        s_strides = (0, 0)
    tiles = dict(BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], DOT_F32=_interpreting(),
                 num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if mode == "tokens":
        R, K = a.shape
        N = b.shape[1] if b.dim() == 3 else b.shape[0] // E
        y = torch.empty((R, N), dtype=out_dtype, device=a.device)
        grid = ((cdiv(R, cfg["BM"]) + E + 1) * cdiv(N, cfg["BN"]),)
        # one b scale block per tile: 128-row blocks that neither straddle experts nor tiles
        tile_scale = fp8 and br_b >= cfg["BN"] and br_b % cfg["BN"] == 0 and N % br_b == 0
        f = sa if factor is None else factor.float().contiguous()
        if tma:
            from .gemm_grouped_tma import launch_tokens
            launch_tokens(a_arg, b_arg, y, sa, sb, offs, f, R, N, K, E, flags, tiles, grid,
                          tile_scale, factor is not None)
            return y
        _tokens_kernel[grid](a_arg, b_arg, y, sa, sb, offs, f, R, N, K, E, a.stride(0),
                             b_strides[0], b_strides[1], b_strides[2], y.stride(0), *s_strides,
                             **flags,
                             B_TILE_SCALE=tile_scale, HAS_F=factor is not None, **tiles)
        return y
    M, N = a.shape[0], b.shape[0]
    y = torch.empty((E, M, N), dtype=torch.float32, device=a.device)
    grid = (E * cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"]),)
    if tma:
        from .gemm_grouped_tma import launch_reduce
        launch_reduce(a_arg, b_arg, y, sa, sb, offs, M, N, flags, tiles, grid)
        return y
    _reduce_kernel[grid](a_arg, b_arg, y, sa, sb, offs, M, N, a.stride(0), b.stride(0),
                         y.stride(1), *s_strides, **flags, K_ALIGN=k_align, **tiles)
    return y


def uses_tma(a: torch.Tensor, b: torch.Tensor, config: dict | None = None) -> bool:
    """Whether :func:`grouped_gemm` reads these operands through TMA descriptors: FP8 codes,
    ``TMA`` (or the call's ``config["TMA"]``) on, and both aligned as TMA needs (else the
    pointer kernels)."""
    if not (a.dtype in _FP8 and (config or {}).get("TMA", TMA)):
        return False
    from .gemm_grouped_tma import tma_ok
    return tma_ok(a, b.contiguous())        # FP8 b is 2-D; contiguous already in practice


def _config(fp8: bool, mode: str, config: dict | None, device: torch.device,
            tma: str = "") -> dict:
    """The tile for this call: CONFIG's (or ``config`` over it), SMALL_SMEM where CONFIG's
    pipeline would not fit the device's shared memory (e.g. 99 KB on sm_86/89). ``tma``: the
    TMA kernels' key suffix ("_tma"; "tokens" also "_tma_small")."""
    key = "bf16" if not fp8 else ("fp8_reduce" if mode == "reduce" else "fp8")
    key += tma
    cfg = {**CONFIG[key], **{k: v for k, v in (config or {}).items() if k != "TMA"}}
    if config or device.type != "cuda" or fp8:
        return cfg
    need = cfg["num_stages"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2
    props = torch.cuda.get_device_properties(device)
    return cfg if need <= getattr(props, "shared_memory_per_block_optin", 101376) else \
        dict(SMALL_SMEM)


def _k_align(fp8: bool, k_align: int) -> int:
    """The "reduce" groups' end multiple the kernel may assume: FP8 chunks make it 128."""
    if k_align < 1 or k_align & (k_align - 1):
        raise ValueError(f"grouped_gemm: k_align must be a power of two, got {k_align}")
    return max(k_align, 128) if fp8 else k_align


def _values(t, s, br) -> torch.Tensor:
    """fp32 values of an operand: FP8 codes times their expanded block scales."""
    if s is None:
        return t.float()
    s = s.float().repeat_interleave(br, dim=0)[: t.shape[0]]
    s = s.repeat_interleave(128, dim=1)[:, : t.shape[1]]
    return t.float() * s


def grouped_gemm_reference(a, b, offs, mode, *, sa=None, sb=None, br_a=1, br_b=1, config=None,
                           k_align=1, factor=None, out_dtype=torch.float32):
    """The spec of :func:`grouped_gemm`: fp32, one matmul per group (reads ``offs`` on the host,
    so it also checks the "reduce" groups' ``k_align`` promise); ``factor`` times each group's
    fp32 rows, then the cast."""
    if (factor is not None or out_dtype != torch.float32) and mode != "tokens":
        raise ValueError("grouped_gemm: factor / out_dtype are for mode='tokens'")
    fp8 = _check(a, b, offs, mode, sa, sb, br_a, br_b)
    k_align = _k_align(fp8, k_align)
    b = b.reshape(-1, b.shape[-1])              # a 3-D [E, N, K] b: its experts stacked
    if fp8:      # per-chunk scaling equals scaling the values: every product is exact in fp32
        a_hp, b_hp = _values(a, sa, br_a), _values(b, sb, br_b)
    else:
        a_hp, b_hp = a.float(), b.float()
    ends, start = [int(v) for v in offs.tolist()], 0
    if mode == "tokens":
        n = b.shape[0] // len(ends)
        y = a_hp.new_zeros((a.shape[0], n))
        for e, end in enumerate(ends):
            y[start:end] = a_hp[start:end] @ b_hp[e * n:(e + 1) * n].t()
            if factor is not None:
                y[start:end] *= factor[e].float()
            start = end
        return y.to(out_dtype)
    y = a_hp.new_zeros((len(ends), a.shape[0], b.shape[0]))
    for e, end in enumerate(ends):
        if end % k_align:
            raise ValueError(f"grouped_gemm: 'reduce' groups must end at multiples of "
                             f"{k_align}{' (FP8 chunks)' if fp8 else ''}, group {e} ends at "
                             f"{end}")
        y[e] = a_hp[:, start:end] @ b_hp[:, start:end].t()
        start = end
    return y
