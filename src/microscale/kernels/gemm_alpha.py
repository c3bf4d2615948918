"""bf16 GEMM times a per-tensor factor: ``y = cast(α · A Bᵀ)``, NVFP4's α in the epilogue.

Why it exists. On Hopper an NVFP4 GEMM runs on bf16 tensor cores over the partially
dequantized operands ``value · block_scale`` (exact in bf16, ``gemm_fp4``). What is left of
SPEC §6 is the per-tensor factor ``α = amax_a · amax_b / 7225344``, applied in fp32 to the fp32
sum, then one rounding to the output dtype. α lives on the device (a host copy would be a sync),
and cuBLAS through torch takes its ``alpha`` only as a Python number. So the sum used to leave
the GEMM in fp32: 4 bytes written and read back per output element, against 2 + 2 for bf16,
with the multiply fused into whatever consumed y. At 125m that is ~5 ms of a 77 ms nvfp4 step
(the fprop and dgrad outputs of every quantized layer; the session 14 profile puts the nvfp4
step's norm + elementwise 5 ms above bf16's, its GEMMs 2 ms).

This kernel reads α from device memory in its epilogue (or makes it there from the two
amaxes, as ``quant.nvfp4.nvfp4_alpha`` does, so no small kernels run before it) and writes the
output dtype directly: ``y[m, n] = round(α · Σ_k a[m, k] · b[n, k])``, the products and the
sum in fp32 on the tensor cores, then the reference's own arithmetic (one fp32 multiply, one
rounding). Exact up to summation order, like every GEMM path here. Measured (H100, session
16): 0.91-1.03x cuBLAS bf16 at the 125m/1b shapes; 125m nvfp4 step 0.557x -> 0.606x of bf16.

An *epilogue op* (``alpha_mm(..., epilogue=(op, e2))``, an op of two tensors from
``op_specs.PROLOGUES``) makes the kernel store ``op(y, e2)`` instead of ``y``: the output is
rounded as usual, the op runs on it and e2's tile (``quant_rowcol_reg.prologue_of``'s
arithmetic, one more rounding), so e2 is read once and ``y`` is never written. The relu² MLP's
backward uses it to write ``du = relu_square_grad(ds, u)`` from the down projection's dgrad
(``nn.mlp``). The TMA kernel then stores in halves with three stages (e's tile buffer).

Layout: A ``[M, K]`` K-contiguous; B ``[N, K]`` either K-contiguous or N-contiguous (the
transpose of a row-major ``[K, N]``: an NVFP4 weight's 16×16-tiled expanded view serves fprop as
W and dgrad as its transpose ``Wᵀ``, with no copy, ``nn.function.weight_views``); bf16 or
fp16; y ``[M, N]`` row-major. The MMAs see the same tiles either way (B_KN only changes how a
tile is loaded), so both layouts give the same bits. Two variants:

* ``_alpha_mm_tma_kernel`` (CUDA, sm_90+): persistent, one program per SM walking the output
  tiles in grouped order; operands and output through TMA descriptors (out-of-range rows and
  K columns read as zeros, stores clipped), the K loop pipelined by Triton across tiles.
  Needs 16-byte aligned rows (K and N multiples of 8 for 2-byte types).
* ``_alpha_mm_kernel``: the same math with pointer loads, one program per tile; the
  interpreter's and any misaligned call's path.

The dequant path's GEMM (``gemm_fp4``'s ``"dequant"`` strategy, after its dequantize pass) is
:func:`_bf16_gemm_with_factor`, also here: the two bf16 operands and the factor ``f`` (None: 1;
a pair of NVFP4 amaxes: their α), and one of two ways to apply it. This kernel, for a 2-byte
output on CUDA, and for an fp32 one (a weight gradient) with enough output tiles that no split-K
is missed (``gemm_paths.alpha_epilogue``); otherwise one cuBLAS bf16 GEMM with an fp32
output (``_mm_fp32_out``; on CPU an fp32 matmul of the exact bf16 values), ``f`` multiplied in
place (``_scale_inplace``, a Triton pass at memory speed on CUDA) and one cast to the output.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..backend import _interpreting
from ..op_specs import PROLOGUES, apply_prologue, check_epilogue
from ..quant.nvfp4 import nvfp4_alpha
from ._rht import raise_amaxes, tile_amaxes
from .quant_nvfp4_reg import RHT_SIGN_MASK
from ._utils import cdiv, grouped_tile, round_to_input_dtype
from .gemm_paths import alpha_epilogue
from .quant_rowcol_reg import prologue_of

__all__ = ["alpha_mm", "tile_for", "CONFIG"]

# Tile (BM, BN, BK, stages, warps): the best of bench_alpha_mm.py's configs at every 125m and
# 1b fprop/dgrad shape (session 16, H100: 0.91-1.03x cuBLAS bf16; 128x128 4-12% slower there),
# its loops flattened (session 28: a 1b step 0.6% faster). SMALL_TILE, for B of at most SMALL_NK
# elements: the epilogue stored in two halves frees the shared memory for a fourth stage
# (session 26, H100: 3-14% faster than TILE at every 125m shape; slower at 1b's).
# NARROW_TILE where N leaves >= 1/8 of the 256-wide tiles' columns empty (N = 128, 384, 640, ..):
# H200, µs SMALL_TILE -> NARROW_TILE (bf16), 8192x640x2560 58.4 -> 54.0 (40.1), 16384x640x2560
# 91.1 -> 88.0 (session 58); 50m nvfp4 training 0.7583x -> 0.7645x of bf16 (session 59).
CONFIG = {
    "TMA": True,
    "TILE": dict(BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8),
    "SMALL_TILE": dict(BM=128, BN=256, BK=64, NUM_STAGES=4, num_warps=8, SUBTILE=True),
    "NARROW_TILE": dict(BM=128, BN=128, BK=64, NUM_STAGES=4, num_warps=4),
    "SMALL_NK": 3072 * 768,
    "GROUP_M": 8,
}


def tile_for(n: int, k: int, narrow: bool = True) -> dict:
    """The default tile of an ``[M, K] · [N, K]ᵀ`` call (:data:`CONFIG`); ``narrow``: the
    narrow tile may be taken (``alpha_mm``: only as session 58 timed it)."""
    padded = cdiv(n, 256) * 256
    if narrow and CONFIG.get("NARROW_TILE") and 8 * (padded - n) >= padded:
        return CONFIG["NARROW_TILE"]
    return CONFIG["SMALL_TILE"] if n * k <= CONFIG["SMALL_NK"] else CONFIG["TILE"]


@triton.jit
def _factor(f_ptr, fb_ptr, FROM_AMAX: tl.constexpr):
    """The epilogue factor: ``f_ptr[0]``, or with FROM_AMAX NVFP4's α from the two amaxes as
    ``quant.nvfp4.nvfp4_alpha`` computes it (an infinite amax enters as 2688, NaN stays NaN;
    ``fp32(fp32(a · b) / 7225344)`` with an IEEE division), so no small kernels run before
    the GEMM to make it."""
    if FROM_AMAX:
        a = tl.load(f_ptr)
        b = tl.load(fb_ptr)
        a = tl.where(tl.abs(a) == float("inf"), 2688.0, a)
        b = tl.where(tl.abs(b) == float("inf"), 2688.0, b)
        f = tl.math.div_rn(a * b, 7225344.0)
    else:
        f = tl.load(f_ptr)
    return f


@triton.jit
def _epilogue_op(y, e, EPI: tl.constexpr, IN_DTYPE: tl.constexpr):
    """The output tile ``y`` (fp32, already rounded to the output dtype) through the op
    ``EPI`` (``op_specs.PROLOGUES``' kernel code, 0: none) of it and the tile ``e`` of the
    second tensor: ``prologue_of``'s arithmetic, one more rounding to the output dtype."""
    if EPI != 0:
        y = prologue_of(y, e.to(tl.float32), EPI, IN_DTYPE)
    return y


@triton.jit
def _alpha_mm_kernel(a_ptr, b_ptr, f_ptr, fb_ptr, y_ptr, M, N, K, stride_a, stride_bn, stride_bk,
                     stride_y, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr, EVEN_K: tl.constexpr,
                     DOT_F32: tl.constexpr, FROM_AMAX: tl.constexpr, e_ptr=None,
                     EPI: tl.constexpr = 0, OUT_DTYPE: tl.constexpr = 1, amax_ptr=None,
                     AMAX: tl.constexpr = 0, SIGNS: tl.constexpr = 0,
                     AMAX_OP: tl.constexpr = 0):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # Rows past the edge read row (r mod M): in range, and their results are never stored.
    a_ptrs = a_ptr + (rm % M)[:, None].to(tl.int64) * stride_a + rk[None, :]
    b_ptrs = b_ptr + (rn % N)[None, :].to(tl.int64) * stride_bn + rk[:, None] * stride_bk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=NUM_STAGES):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)                                         # Bᵀ tile [BK, BN]
        else:
            kmask = (k0 + rk) < K
            a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
        if DOT_F32:     # the interpreter multiplies bf16 dot operands as raw integers
            a = a.to(tl.float32)
            b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    y = acc * _factor(f_ptr, fb_ptr, FROM_AMAX)
    if DOT_F32 and y_ptr.dtype.element_ty == tl.bfloat16:
        y = round_to_input_dtype(y, 1)      # the interpreter's cast truncates; RNE here
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    if EPI != 0:        # y (stride_y apart, as e) rounded first, then the op and its rounding
        e = tl.load(e_ptr + rm[:, None].to(tl.int64) * stride_y + rn[None, :], mask=mask,
                    other=0.0)
        y = _epilogue_op(round_to_input_dtype(y, OUT_DTYPE), e, EPI, OUT_DTYPE)
    y_ptrs = y_ptr + rm[:, None].to(tl.int64) * stride_y + rn[None, :]
    y = y.to(y_ptr.dtype.element_ty)
    tl.store(y_ptrs, y, mask=mask)
    if AMAX != 0:       # this tile's maxima (rows and columns past the edge read as 0)
        m_r, m_c = tile_amaxes(tl.where(mask, y.to(tl.float32), 0.0), BM, BN, AMAX, OUT_DTYPE,
                               SIGNS, AMAX_OP)
        raise_amaxes(amax_ptr, m_r, m_c, AMAX, OUT_DTYPE)


@triton.jit
def _alpha_mm_tma_kernel(a_desc, b_desc, y_desc, f_ptr, fb_ptr, M, N, K,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                         FROM_AMAX: tl.constexpr, B_KN: tl.constexpr = False,
                         FLATTEN: tl.constexpr = True, WS: tl.constexpr = False,
                         SUBTILE: tl.constexpr = False, e_desc=None, EPI: tl.constexpr = 0,
                         OUT_DTYPE: tl.constexpr = 1, amax_ptr=None, AMAX: tl.constexpr = 0,
                         SIGNS: tl.constexpr = 0, AMAX_OP: tl.constexpr = 0):
    """``SUBTILE``: the epilogue stores the tile as two ``[BM, BN/2]`` halves (y_desc's block);
    ``WS``: Triton's warp specialization of the loop (loads and MMAs in their own warps);
    ``FLATTEN``: the tile and K loops flattened into one pipelined loop. Same bits either way:
    the MMAs and the epilogue's arithmetic do not change. ``EPI``: the output through an op of
    it and a second tensor (``e_desc``, y's shape and blocks) before the store. ``AMAX``: the
    output's NVFP4 amaxes into ``amax_ptr`` (``_rht.tile_amaxes``; out-of-range rows and
    columns are zeros here, as TMA reads them, and every ``EPI`` op maps 0 to 0), of
    ``op(y)`` with ``AMAX_OP`` (a one-tensor ``op_specs.PROLOGUES`` code: relu²)."""
    n_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    f = _factor(f_ptr, fb_ptr, FROM_AMAX)
    m_r = tl.full((), 0.0, tl.float32)
    m_c = m_r
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), flatten=FLATTEN,
                      num_stages=NUM_STAGES, warp_specialize=WS):
        pid_m, pid_n = grouped_tile(t, M, N, BM, BN, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            if B_KN:                      # b_desc over Bᵀ [K, N] (row-major): tiles [BK, BN]
                acc = tl.dot(a, b_desc.load([ki * BK, pid_n * BN]), acc)
            else:
                acc = tl.dot(a, b_desc.load([pid_n * BN, ki * BK]).T, acc)
        if SUBTILE:
            lo, hi = tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
            r_lo, c_lo = _tile_out(y_desc, e_desc, pid_m * BM, pid_n * BN, lo * f, EPI,
                                   OUT_DTYPE, AMAX, SIGNS, AMAX_OP)
            r_hi, c_hi = _tile_out(y_desc, e_desc, pid_m * BM, pid_n * BN + BN // 2, hi * f,
                                   EPI, OUT_DTYPE, AMAX, SIGNS, AMAX_OP)
            m_r = tl.maximum(m_r, tl.maximum(r_lo, r_hi))
            m_c = tl.maximum(m_c, tl.maximum(c_lo, c_hi))
        else:
            r_t, c_t = _tile_out(y_desc, e_desc, pid_m * BM, pid_n * BN, acc * f, EPI,
                                 OUT_DTYPE, AMAX, SIGNS, AMAX_OP)
            m_r = tl.maximum(m_r, r_t)
            m_c = tl.maximum(m_c, c_t)
    if AMAX != 0:
        raise_amaxes(amax_ptr, m_r, m_c, AMAX, OUT_DTYPE)


@triton.jit
def _tile_out(y_desc, e_desc, r0, c0, y, EPI: tl.constexpr, OUT_DTYPE: tl.constexpr,
              AMAX: tl.constexpr = 0, SIGNS: tl.constexpr = 0, AMAX_OP: tl.constexpr = 0):
    """Store the fp32 tile ``y`` at (r0, c0) in y_desc's dtype, through ``EPI``'s op with
    e_desc's tile at the same place first (the output rounded, the op, its rounding); return
    the stored tile's maxima (``_rht.tile_amaxes``; zeros without ``AMAX``)."""
    if EPI != 0:
        y = _epilogue_op(y.to(y_desc.dtype).to(tl.float32), e_desc.load([r0, c0]), EPI,
                         OUT_DTYPE)
    y = y.to(y_desc.dtype)
    y_desc.store([r0, c0], y)
    return tile_amaxes(y.to(tl.float32), y.shape[0], y.shape[1], AMAX, OUT_DTYPE, SIGNS,
                       AMAX_OP)


_SMS: dict[int, int] = {}


def _num_sms(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]


def _tma_ok(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor, e2=None) -> bool:
    if not CONFIG["TMA"] or _interpreting() or a.device.type != "cuda":
        return False
    if torch.cuda.get_device_capability(a.device)[0] < 9:
        return False
    return all(t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0
               and t.data_ptr() % 16 == 0 for t in (a, b if b.stride(1) == 1 else b.t(), y,
                                                     *(() if e2 is None else (e2,))))


def alpha_mm(a: torch.Tensor, b: torch.Tensor, f: torch.Tensor | tuple, out_dtype: torch.dtype,
             epilogue: tuple | None = None, out_amax=None, **tile) -> torch.Tensor:
    """``round_out(f · a @ b.T)`` for bf16/fp16 ``a [M, K]`` and ``b [N, K]`` (K- or
    N-contiguous: the module docstring's layouts; any other is copied). ``f``: an fp32
    one-element tensor on the device, or a pair ``(amax_a, amax_b)`` of NVFP4 amaxes, whose α
    (``nvfp4_alpha``) the kernel computes itself. ``epilogue`` ``(op, e2)``: the result is
    ``op(y, e2)`` instead (``op_specs.PROLOGUES``; ``e2`` ``[M, N]`` in ``out_dtype``, read
    once in the epilogue), bit for bit ``apply_prologue(op, y, e2)``. ``out_amax``
    (``op_specs.OutAmax``): the epilogue also measures the output's NVFP4 amaxes into its
    buffer, as the amax pass measures a row and a column view. ``tile`` overrides
    :data:`CONFIG` (BM, BN, BK, NUM_STAGES, num_warps, TMA; the TMA kernel's FLATTEN, WS,
    SUBTILE)."""
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k or a.dtype != b.dtype or a.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"alpha_mm: a {tuple(a.shape)} {a.dtype}, b {tuple(b.shape)} {b.dtype}")
    epi, e2 = _epilogue_args(epilogue, m, n, out_dtype)
    a = a if a.stride(1) == 1 else a.contiguous()
    b_kn = b.stride(1) != 1 and b.stride(0) == 1          # Bᵀ is a row-major [K, N]
    b = b if b.stride(1) == 1 or b_kn else b.contiguous()
    from_amax = isinstance(f, tuple)
    fa, fb = (t.reshape(1).float() for t in f) if from_amax else (f.reshape(1).float(),) * 2
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if m == 0 or n == 0:
        if out_amax is not None:
            out_amax.filled = True              # zeros: the amaxes of an empty output
        return y
    # the narrow tile only as timed: 2-byte out, no tile asked for, the TMA kernel (session 58)
    plain = not (tile or epi or out_amax is not None or out_dtype == torch.float32)
    tma_ok = _tma_ok(a, b, y, e2)
    cfg = {**tile_for(n, k, plain and (_interpreting() or tma_ok)), **tile}
    amax_args = {} if out_amax is None else \
        dict(amax_ptr=out_amax.buf, AMAX=2 if out_amax.rht else 1, SIGNS=RHT_SIGN_MASK,
             AMAX_OP=PROLOGUES[out_amax.op][2] if out_amax.op else 0)
    use_tma = cfg.pop("TMA", True) and tma_ok
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    if use_tma and (epi or out_dtype == torch.float32 or out_amax is not None):
        # e's tile buffer, or a 4-byte output tile: 128x256 + 4 stages would need 256 KB of
        # shared memory (offline, sm_90), halves + 3 stages 208 KB (H100: 227 KB). The
        # amaxes' RHT on a whole tile spills (255 registers, 144 B of stack); halves do not
        cfg["SUBTILE"], cfg["NUM_STAGES"] = True, min(cfg["NUM_STAGES"], 3)
    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        b_desc = TensorDescriptor.from_tensor(b.t(), [bk, bn]) if b_kn else \
            TensorDescriptor.from_tensor(b, [bn, bk])
        y_block = [bm, bn // 2 if cfg.get("SUBTILE") else bn]
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]), b_desc,
                 TensorDescriptor.from_tensor(y, y_block))
        e_desc = TensorDescriptor.from_tensor(e2, y_block) if epi else None
        grid = (min(_num_sms(a.device), cdiv(m, bm) * cdiv(n, bn)),)
        _alpha_mm_tma_kernel[grid](*descs, fa, fb, m, n, k, GROUP_M=CONFIG["GROUP_M"],
                                   FROM_AMAX=from_amax, B_KN=b_kn, e_desc=e_desc, EPI=epi,
                                   OUT_DTYPE=_DTYPE_CODE[out_dtype], **amax_args, **cfg)
    else:
        for key in ("FLATTEN", "WS", "SUBTILE"):           # the TMA kernel's knobs only
            cfg.pop(key, None)
        grid = (cdiv(m, bm) * cdiv(n, bn),)
        _alpha_mm_kernel[grid](a, b, fa, fb, y, m, n, k, a.stride(0), b.stride(0), b.stride(1),
                               y.stride(0), GROUP_M=CONFIG["GROUP_M"], EVEN_K=k % bk == 0,
                               DOT_F32=_interpreting(), FROM_AMAX=from_amax, e_ptr=e2, EPI=epi,
                               OUT_DTYPE=_DTYPE_CODE[out_dtype], **amax_args, **cfg)
    if out_amax is not None:
        out_amax.filled = True
    return y


_DTYPE_CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


def _epilogue_args(epilogue: tuple | None, m: int, n: int, out_dtype: torch.dtype):
    """``(kernel code, e2)`` of an ``(op, e2)`` epilogue (``(0, None)``: none): an op of two
    tensors (``op_specs.PROLOGUES``), e2 the output's shape and dtype, contiguous (the pointer
    kernel reads it with y's strides)."""
    if epilogue is None:
        return 0, None
    op, e2 = epilogue
    check_epilogue("alpha_mm", op, e2, (m, n), out_dtype)
    return PROLOGUES[op][2], e2.contiguous()


# ----------------------------------------------------------------- gemm_fp4's dequant path
@triton.jit
def _scale_inplace_kernel(y_ptr, f_ptr, n, BLOCK: tl.constexpr):
    """y *= f for a contiguous y and an fp32 device scalar f (the GEMM epilogue factor)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (y * tl.load(f_ptr)).to(y_ptr.dtype.element_ty), mask=mask)


def _scale_inplace(y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """``y.mul_(f)`` at memory speed on CUDA: torch's kernel for a dense tensor times a 0-dim
    device tensor is not vectorized (it measured ~4x slower than a copy on an H200)."""
    if y.device.type != "cuda" or not y.is_contiguous():
        return y.mul_(f)
    n, block = y.numel(), 4096
    _scale_inplace_kernel[(cdiv(n, block),)](y, f.float().reshape(1), n, BLOCK=block,
                                                    num_warps=8)
    return y


_MM_OUT_DTYPE: dict[str, bool] = {}


def _mm_fp32_out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """``a @ b.T`` with an fp32 output from bf16 inputs when this torch supports ``out_dtype``."""
    dev = a.device.type
    if dev == "cpu":              # CPU (tests): an fp32 GEMM on the exact bf16 values
        return a.float() @ b.float().t()
    if _MM_OUT_DTYPE.get(dev, True):
        try:
            y = torch.mm(a, b.t(), out_dtype=torch.float32)
            _MM_OUT_DTYPE[dev] = True
            return y
        except (TypeError, RuntimeError, NotImplementedError):  # older torch / unsupported device
            _MM_OUT_DTYPE[dev] = False
    return None


def _bf16_gemm_with_factor(a_bf16: torch.Tensor, b_bf16: torch.Tensor, f, out_dtype: torch.dtype,
                           epilogue: tuple | None = None) -> torch.Tensor:
    """bf16 GEMM then the epilogue factor ``f`` (None: 1; a pair of NVFP4 amaxes: their α),
    one rounding to ``out_dtype``; with ``epilogue`` ``(op, e2)``, ``op(y, e2)`` of that.

    ``epilogue``'s optional third item, an ``op_specs.OutAmax``, is filled by the α kernel.
    ``f`` lives on the device. A 2-byte output with ``f``, and an fp32 one of enough output
    tiles, go through :func:`alpha_mm` (α made and applied in the Triton kernel's epilogue;
    ``gemm_paths.alpha_epilogue``), and so does the epilogue op; otherwise cuBLAS with an fp32
    output, then ``f`` in fp32 and the cast
    (cuBLAS's own ``alpha`` would need a host copy), then the op.
    """
    if f is not None and alpha_epilogue(out_dtype, a_bf16.device, a_bf16.shape[0],
                                        b_bf16.shape[0]):
        out_amax = epilogue[2] if epilogue is not None and len(epilogue) > 2 else None
        return alpha_mm(a_bf16, b_bf16, f, out_dtype,
                        epilogue=epilogue[:2] if epilogue and epilogue[0] else None,
                        out_amax=out_amax)
    if epilogue is not None:
        return apply_prologue(epilogue[0], _bf16_gemm_with_factor(a_bf16, b_bf16, f, out_dtype),
                              epilogue[1])
    if f is None and out_dtype != torch.float32:
        return (a_bf16 @ b_bf16.t()).to(out_dtype)
    y = _mm_fp32_out(a_bf16, b_bf16)
    if y is None:                  # torch without mm(out_dtype=): fp32 operands, exact products
        y = a_bf16.float() @ b_bf16.float().t()
    if f is not None:
        y = _scale_inplace(y, nvfp4_alpha(*f) if isinstance(f, tuple) else f)
    return y if out_dtype == torch.float32 else y.to(out_dtype)
