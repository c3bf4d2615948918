"""Fused NVFP4 quantization kernels (SPEC §2-§5), bit-exact with ``quant.nvfp4``.

Two launches per call:

1. **amax pass** -- one read of x; each program reduces its tile to ``max|v|`` and folds it
   into a 2-slot fp32 buffer with an atomic max (slot 0: the row view, slot 1: the column
   view). With the RHT on, ``v`` is the rotated tile rounded to the input dtype, so the amax
   is the post-RHT one, as the spec requires. Skipped for a view whose ``amax`` is given.
2. **quantize pass** -- one more read of x (the second view's load of a tile hits L1). A
   program loops over ``[BR, BC]`` tiles and emits both views, never transposing in
   registers (Triton would pay a shared-memory layout change per reshape):

   * row view (x along its columns): the tile is read as ``[BR, BC/16, 16]``, blocks on the
     last axis; optional RHT on 16-chunks of each row, 1x16 blocks or 16x16 tiles (2D,
     weights); codes ``uint8[rows, cols/2]``, scales ``e4m3[rows, cols/16]``;
   * column view (xᵀ along x's rows, what wgrad consumes): the tile is read as
     ``[BR/16, 16, BC]`` (16-row groups) and rotated by ``Mᵀ @ X_g`` on the tensor cores;
     each (group, column) is one block, written straight into ``uint8[cols, rows/2]`` and
     ``e4m3[cols, rows/16]``.

   The 16 codes of a block are packed into two uint32 words with multiply-adds (the same
   bytes as ``pack_fp4``), so every block is stored with one 8-byte write.

Non-finite input (``check_finite=False``) as the reference: NaN is read as 0 (amax and block
maxima ignore it) and its block's (2D: tile's) scale byte becomes the E4M3 NaN 0x7F; ±Inf
makes amax Inf, so S_enc = 1, its block scale 448 and the Inf itself ±6.

Per block the fp32 arithmetic is the reference's, in its order::

    S_enc = min(2688 / amax, FLT_MAX) (0 -> 1);  S_dec = 1 / S_enc   (IEEE divisions)
    s_b   = min(vmax * fp32(S_enc * fp32(1/6)), 448) -> e4m3 RNE byte
    enc_b = min(1 / (fp32(s_b) * S_dec), FLT_MAX);  code = e2m1(clamp(x * enc_b, +-6))

SR reads the caller's ``rand_bits`` (bit-exact with the reference) or draws bytes from
Philox in-kernel, seeded by ``torch.randint`` on the caller's generator.

Bytes moved for bf16 x (per element): 2 + 2 read, 0.5625 written per view.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..quant.common import check_given_scalar, check_input
from ..tensor import QFormat, QuantizedTensor
from .quant_nvfp4_reg import RHT_SIGN_MASK, nvfp4_amax_reg_kernel, nvfp4_rowcol_reg_kernel
from .quant_nvfp4_rows import _tile_max, nvfp4_rows_kernel
from ._utils import (IN_DTYPE_CODE, block_flag, check_kernel_input, check_rand_bits,
                     check_views, e2m1_mag_code, e2m1_sr_mag_code, kernel_seed,
                     nvfp4_block_scales, nvfp4_global_scales, pack16, persistent_grid, rht_cols,
                     rht_matrix_on, rht_tile, select_byte, sign_nibble, split_nan, tile_coords)

__all__ = ["quantize_nvfp4_triton", "quantize_rowcol_nvfp4_triton", "CONFIG"]

# Tile shapes (tuned on H100; see benchmarks/results/quant_notes.md).
# PASS: "reg" (``quant_nvfp4_reg``: a column's 16-row block in one thread's registers; the
# default wherever it applies: 1x16 row views without RHT, 1x16 column views with or without
# RHT, RNE or SR), "rows" (``quant_nvfp4_rows``: the column view as rows of the transposed
# tile; what "reg" falls back to, e.g. for 2D weight views) or "v3" (the column view without
# transposes, below); all bit-identical. "rows" measured 3-19% faster than "v3" on an H200 for
# every row+column pair training runs (benchmarks/results/h200_20261123_quant_passes.log).
# Rows-pass tile: 32x32 with 4 warps ran the pairs a training step asks for 21-38% faster than
# 64x64 on an H200 at 16384x768 (64x64 needs 188-221 registers a thread: 12% occupancy,
# latency-bound; benchmarks/results/h200_20261123_quant_profile/). "V3": the v3 pass's tile.
# "REG": the reg pass's tile [16·NI, BC] and launch (maxnreg: ptxas's register cap, None =
# its own choice), and whether it takes stochastically rounded row views (ROW_SR: off, the rows
# pass ran the dy pair faster on an H100 in session 7); "REG_AMAX": its amax pass's.
CONFIG = {"BR": 32, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 16, "NUM_STAGES": 2,
          "V3": {"BR": 64, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 8},
          "REG": {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 2, "NUM_STAGES": 1,
                  "maxnreg": None, "ROW_SR": False},
          "REG_AMAX": {"NI": 16, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 4, "NUM_STAGES": 2},
          "AMAX_BR": 64, "AMAX_BC": 64, "AMAX_WARPS": 4, "AMAX_PROGS_PER_SM": 4,
          "PASS": os.environ.get("MICROSCALE_NVFP4_PASS", "reg")}
_PASSES = ("reg", "rows", "v3")

_OPTS = ("block_2d", "rht", "rht_d", "stochastic", "generator", "seed", "amax", "rand_bits",
         "check_finite")


@triton.jit
def _codes(v, enc, bits, SR: tl.constexpr):
    """E2M1 codes of ``clamp(v * enc, +-6)`` (int32), RNE or stochastic."""
    y = v * enc
    a = tl.minimum(tl.abs(y), 6.0)
    if SR:
        mag = e2m1_sr_mag_code(a, bits)
    else:
        mag = e2m1_mag_code(a)
    return mag | sign_nibble(y)


@triton.jit
def _abs0(v):
    """|v| with NaN read as 0 (what every max in this file sees)."""
    return tl.where(v != v, 0.0, tl.abs(v))


@triton.jit
def _tile_cols(a, BR: tl.constexpr, BC: tl.constexpr):
    """2D, column view: each tile's max of ``a`` [BR/16, BC], repeated on its 16 columns."""
    t = tl.max(tl.reshape(a, (BR // 16, BC // 16, 16)), axis=2)
    return tl.reshape(tl.broadcast_to(t[:, :, None], (BR // 16, BC // 16, 16)), (BR // 16, BC))


@triton.jit
def _load_rows(x_ptr, offs_r, c0, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """Row-view tile ``[BR, BC/16, 16]`` (blocks of 16 along x's columns), fp32."""
    blk = c0 // 16 + tl.arange(0, BC // 16)
    col = blk[:, None] * 16 + tl.arange(0, 16)[None, :]
    mask = (offs_r < rows)[:, None, None] & (blk < cols // 16)[None, :, None]
    v = tl.load(x_ptr + offs_r[:, None, None] * cols + col[None, :, :], mask=mask, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _load_cols(x_ptr, r0, offs_c, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """Column-view tile ``[BR/16, 16, BC]`` (blocks of 16 along x's rows), fp32."""
    row = r0 + tl.arange(0, BR // 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    mask = (row < rows)[:, :, None] & (offs_c < cols)[None, None, :]
    v = tl.load(x_ptr + row[:, :, None] * cols + offs_c[None, None, :], mask=mask, other=0.0)
    return v.to(tl.float32)


@triton.jit
def _rot_rows(v, m_ptr, BR: tl.constexpr, BC: tl.constexpr, IN_DTYPE: tl.constexpr):
    """RHT of a row-view tile along its 16-blocks."""
    i16 = tl.arange(0, 16)
    m = tl.load(m_ptr + i16[:, None] * 16 + i16[None, :])
    y = rht_tile(tl.reshape(v, (BR, BC)), m, BR, BC, 16, IN_DTYPE)
    return tl.reshape(y, (BR, BC // 16, 16))


@triton.jit
def _rot_cols(v, m_ptr, BR: tl.constexpr, BC: tl.constexpr, IN_DTYPE: tl.constexpr):
    """RHT of a column-view tile along x's rows (``Mᵀ @ X`` per 16-row group)."""
    i16 = tl.arange(0, 16)
    mt = tl.load(m_ptr + i16[None, :] * 16 + i16[:, None])
    return rht_cols(v, mt, BR // 16, 16, BC, IN_DTYPE)


@triton.jit
def _nvfp4_amax_kernel(x_ptr, amax_ptr, m_ptr, rows, cols, n_tc, n_tiles,
                       IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                       ROW: tl.constexpr, ROW_RHT: tl.constexpr,
                       COL: tl.constexpr, COL_RHT: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Each program loops over tiles keeping an elementwise running max (no cross-thread
    reduction inside the loop), reduces it once, and does one atomic per view."""
    acc_r = tl.zeros((BR // 16, 16, BC), dtype=tl.float32)
    acc_rr = tl.zeros((BR, BC // 16, 16), dtype=tl.float32)
    acc_c = tl.zeros((BR // 16, 16, BC), dtype=tl.float32)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        offs_c = c0 + tl.arange(0, BC)
        xc = _load_cols(x_ptr, r0, offs_c, rows, cols, BR, BC)           # [BR/16, 16, BC]
        if ROW:
            if ROW_RHT:
                v = _rot_rows(_load_rows(x_ptr, r0 + tl.arange(0, BR), c0, rows, cols, BR, BC),
                              m_ptr, BR, BC, IN_DTYPE)
                acc_rr = tl.maximum(acc_rr, _abs0(v))
            else:
                acc_r = tl.maximum(acc_r, _abs0(xc))
        if COL:
            v = xc
            if COL_RHT:
                v = _rot_cols(xc, m_ptr, BR, BC, IN_DTYPE)
            acc_c = tl.maximum(acc_c, _abs0(v))
    if ROW:
        if ROW_RHT:
            tl.atomic_max(amax_ptr, tl.max(tl.max(tl.max(acc_rr, axis=2), axis=1), axis=0))
        else:
            tl.atomic_max(amax_ptr, tl.max(tl.max(tl.max(acc_r, axis=2), axis=1), axis=0))
    if COL:
        tl.atomic_max(amax_ptr + 1, tl.max(tl.max(tl.max(acc_c, axis=2), axis=1), axis=0))


@triton.jit
def _row_view(x_ptr, s_enc6, s_dec, m_ptr, seed_ptr, q32_ptr, s_ptr, bits_ptr, r0, c0, rows, cols,
              IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, RHT: tl.constexpr,
              TWO_D: tl.constexpr, SR: tl.constexpr):
    """Row view of one tile: 16 codes of a block -> two uint32 words, one E4M3 scale byte."""
    offs_r = r0 + tl.arange(0, BR)
    blk = c0 // 16 + tl.arange(0, BC // 16)
    e = tl.arange(0, 16)
    v = _load_rows(x_ptr, offs_r, c0, rows, cols, BR, BC)
    if RHT:
        v = _rot_rows(v, m_ptr, BR, BC, IN_DTYPE)
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=2)                                    # [BR, BC/16]
    bad = block_flag(nan, 2).to(tl.int32)                               # NaN in the block
    if TWO_D:                                  # 16x16 tiles: rows r0.. are 16-aligned
        vmax = _tile_max(vmax, BR, BC)
        bad = _tile_max(bad, BR, BC)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # E4M3 NaN
    ok = (offs_r < rows)[:, None] & (blk < cols // 16)[None, :]
    if SR == 1:
        col = blk[:, None] * 16 + e[None, :]
        bits = tl.load(bits_ptr + offs_r[:, None, None] * cols + col[None, :, :],
                       mask=ok[:, :, None], other=0).to(tl.int32)
    elif SR == 2:
        w0, w1, w2, w3 = tl.randint4x(tl.load(seed_ptr), offs_r[:, None] * (cols // 16) + blk[None, :])
        bits = select_byte(w0[:, :, None], w1[:, :, None], w2[:, :, None], w3[:, :, None],
                           e[None, None, :])
    else:
        bits = 0
    codes = _codes(v, enc[:, :, None], bits, SR > 0)
    lo, hi = pack16(codes, e[None, None, :], 2)
    idx = offs_r[:, None] * (cols // 16) + blk[None, :]
    tl.store(q32_ptr + 2 * idx[:, :, None] + tl.arange(0, 2)[None, None, :], tl.join(lo, hi),
             mask=ok[:, :, None])
    tl.store(s_ptr + idx, scale_byte, mask=ok)


@triton.jit
def _col_view(x_ptr, s_enc6, s_dec, m_ptr, seed_ptr, q32_ptr, s_ptr, bits_ptr, r0, c0, rows, cols,
              IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, RHT: tl.constexpr,
              TWO_D: tl.constexpr, SR: tl.constexpr):
    """Column view of one tile (xᵀ quantized along x's rows), without any transpose: per
    16-row group g and column c, two uint32 words of codes and one scale byte. With TWO_D
    the scale is the 16x16 tile's (16 rows x 16 columns), so the result equals the
    transpose of the 2D row view (SPEC §3): a weight's dgrad view from the same read."""
    offs_c = c0 + tl.arange(0, BC)
    grp = r0 // 16 + tl.arange(0, BR // 16)
    j = tl.arange(0, 16)
    v = _load_cols(x_ptr, r0, offs_c, rows, cols, BR, BC)               # [G, 16, BC]
    if RHT:
        v = _rot_cols(v, m_ptr, BR, BC, IN_DTYPE)
    v, nan = split_nan(v)
    vmax = tl.max(tl.abs(v), axis=1)                                    # [G, BC]
    bad = block_flag(nan, 1).to(tl.int32)
    if TWO_D:                                  # 16x16 tiles: columns c0.. are 16-aligned
        vmax = _tile_cols(vmax, BR, BC)
        bad = _tile_cols(bad, BR, BC)
    scale_byte, enc = nvfp4_block_scales(vmax, s_enc6, s_dec)
    scale_byte = tl.where(bad > 0, 127, scale_byte).to(tl.uint8)      # E4M3 NaN
    ok = (grp < rows // 16)[:, None] & (offs_c < cols)[None, :]
    if SR == 1:
        row = grp[:, None] * 16 + j[None, :]
        bits = tl.load(bits_ptr + offs_c[None, None, :] * rows + row[:, :, None],
                       mask=ok[:, None, :], other=0).to(tl.int32)
    elif SR == 2:
        w0, w1, w2, w3 = tl.randint4x(tl.load(seed_ptr) + 1,
                                      offs_c[None, :] * (rows // 16) + grp[:, None])
        bits = select_byte(w0[:, None, :], w1[:, None, :], w2[:, None, :], w3[:, None, :],
                           j[None, :, None])
    else:
        bits = 0
    codes = _codes(v, enc[:, None, :], bits, SR > 0)
    lo, hi = pack16(codes, j[None, :, None], 1)
    idx = offs_c[None, :] * (rows // 16) + grp[:, None]
    tl.store(q32_ptr + 2 * idx[:, :, None] + tl.arange(0, 2)[None, None, :], tl.join(lo, hi),
             mask=ok[:, :, None])
    tl.store(s_ptr + idx, scale_byte, mask=ok)


@triton.jit
def _nvfp4_quant_kernel(x_ptr, amax_ptr, m_ptr, seed_ptr,
                        qr_ptr, sr_ptr, br_ptr, qc_ptr, sc_ptr, bc_ptr, rows, cols, n_tc, n_tiles,
                        IN_DTYPE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                        ROW: tl.constexpr, ROW_RHT: tl.constexpr, ROW_2D: tl.constexpr,
                        ROW_SR: tl.constexpr,
                        COL: tl.constexpr, COL_RHT: tl.constexpr, COL_2D: tl.constexpr,
                        COL_SR: tl.constexpr, NUM_STAGES: tl.constexpr):
    s_enc6_r, s_dec_r = nvfp4_global_scales(amax_ptr)          # once per program, not per tile
    s_enc6_c, s_dec_c = nvfp4_global_scales(amax_ptr + 1)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        r0, c0 = tile_coords(t, n_tc, BR, BC)
        if ROW:
            _row_view(x_ptr, s_enc6_r, s_dec_r, m_ptr, seed_ptr, qr_ptr, sr_ptr, br_ptr, r0, c0, rows,
                      cols, IN_DTYPE, BR, BC, ROW_RHT, ROW_2D, ROW_SR)
        if COL:
            _col_view(x_ptr, s_enc6_c, s_dec_c, m_ptr, seed_ptr, qc_ptr, sc_ptr, bc_ptr, r0, c0, rows,
                      cols, IN_DTYPE, BR, BC, COL_RHT, COL_2D, COL_SR)


# --------------------------------------------------------------------------- host side
class _View:
    """One requested view's options, validated, plus its output buffers."""

    def __init__(self, x2: torch.Tensor, opts: dict, transposed: bool):
        unknown = set(opts) - set(_OPTS)
        if unknown:
            raise KernelUnsupported(f"options {sorted(unknown)}")
        self.opts = opts
        self.block_2d = bool(opts.get("block_2d", False))
        self.rht = bool(opts.get("rht", False))
        self.rht_d = int(opts.get("rht_d", 16))
        self.stochastic = bool(opts.get("stochastic", False))
        if self.rht and self.rht_d != 16:
            raise KernelUnsupported(f"rht_d={self.rht_d} (the kernel does 16)")
        rows, cols = x2.shape
        vr, vc = (cols, rows) if transposed else (rows, cols)
        self.shape = (vr, vc)
        self.bits = check_rand_bits(opts.get("rand_bits"), rows * cols, x2.device) \
            if self.stochastic else None
        self.amax = opts.get("amax")
        check_given_scalar(self.amax, "amax", "nvfp4", opts.get("check_finite", True))
        dev = x2.device
        self.codes = torch.empty((vr, vc // 2), dtype=torch.uint8, device=dev)
        self.scale = torch.empty((vr, vc // 16), dtype=torch.float8_e4m3fn, device=dev)

    @property
    def sr_mode(self) -> int:
        return 0 if not self.stochastic else (1 if self.bits is not None else 2)

    def result(self, amax: torch.Tensor, orig_shape, orig_dtype) -> QuantizedTensor:
        return QuantizedTensor(
            fmt=QFormat.NVFP4, data=self.codes, scale=self.scale, amax=amax, shape=orig_shape,
            orig_dtype=orig_dtype, block=(16, 16) if self.block_2d else (1, 16),
            rht_d=self.rht_d if self.rht else 0, extra={"stochastic": self.stochastic})


class _NoView:
    """Placeholder buffers for a view that is not requested (never written)."""

    def __init__(self, dev):
        self.codes = torch.empty(8, dtype=torch.uint8, device=dev)
        self.scale = torch.empty(1, dtype=torch.float8_e4m3fn, device=dev)
        self.bits = None


def _amax_pass(x2: torch.Tensor, row: _View | None, col: _View | None, m: torch.Tensor,
               reg: bool):
    """fp32 ``[2]`` buffer: slot 0 the row view's amax, slot 1 the column view's.

    Measured by one kernel for the views without a given amax (``reg``: the register-layout
    amax kernel); given ones are copied in. Returns the buffer and the two amax tensors to
    report (the given tensor when given).
    """
    rows, cols = x2.shape
    dev = x2.device
    amax_buf = torch.zeros(2, dtype=torch.float32, device=dev)
    need = [v is not None and v.amax is None for v in (row, col)]
    if any(need) and reg:
        cfg = CONFIG["REG_AMAX"]
        br, bc = 16 * cfg["NI"], cfg["BC"]
        n_tc = triton.cdiv(cols, bc)
        n_tiles = triton.cdiv(rows, br) * n_tc
        grid = (persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)
        nvfp4_amax_reg_kernel[grid](x2, amax_buf, rows, cols, n_tc, n_tiles,
                                    IN_DTYPE_CODE[x2.dtype], cfg["NI"], bc,
                                    rows % br == 0 and cols % bc == 0, need[0], need[1],
                                    bool(col and col.rht), RHT_SIGN_MASK, cfg["NUM_STAGES"],
                                    num_warps=cfg["num_warps"])
    elif any(need):
        cfg = CONFIG
        n_tc = triton.cdiv(cols, cfg["AMAX_BC"])
        n_tiles = triton.cdiv(rows, cfg["AMAX_BR"]) * n_tc
        grid = (persistent_grid(n_tiles, dev, cfg["AMAX_PROGS_PER_SM"]),)
        _nvfp4_amax_kernel[grid](x2, amax_buf, m, rows, cols, n_tc, n_tiles,
                                 IN_DTYPE_CODE[x2.dtype], cfg["AMAX_BR"], cfg["AMAX_BC"],
                                 need[0], bool(row and row.rht), need[1], bool(col and col.rht),
                                 cfg["NUM_STAGES"], num_warps=cfg["AMAX_WARPS"])
    amaxes = []
    for i, v in enumerate((row, col)):
        if v is not None and v.amax is not None:
            given = v.amax.float().reshape(())
            amax_buf[i].copy_(given)
            amaxes.append(given)
        else:
            amaxes.append(amax_buf[i])
    return amax_buf, amaxes


def _reg_refusal(row: _View | None, col: _View | None) -> str | None:
    """Why the "reg" pass cannot take these views (None: it can)."""
    if row is not None and row.rht:
        return "a row view with the RHT"
    if row is not None and row.stochastic and not CONFIG["REG"]["ROW_SR"]:
        return "a stochastically rounded row view (REG['ROW_SR'] is off)"
    if any(v is not None and v.block_2d for v in (row, col)):
        return "16x16 (2D) scales"
    return None


def _choose_pass(row: _View | None, col: _View | None, op: str) -> str:
    """The pass that runs ("reg", "rows" or "v3"), recorded for ``ms.explain()``."""
    want = CONFIG["PASS"]
    if want not in _PASSES:
        raise ValueError(f"quant_nvfp4.CONFIG['PASS'] (MICROSCALE_NVFP4_PASS) must be one of "
                         f"{_PASSES}, got {want!r}")
    key = rowcol_key(row and "nvfp4", col and "nvfp4") if op == "quantize_rowcol" else "nvfp4"
    why = _reg_refusal(row, col) if want == "reg" else None
    if want == "reg" and why is None:
        note_path(op, key, "triton (NVFP4 reg pass: 16-row blocks in registers)")
        return "reg"
    if why is not None:
        note_path(op, key, f"triton (NVFP4 rows pass; the reg pass does not take {why})")
        return "rows"
    note_path(op, key, f"triton (NVFP4 {want} pass, PASS={want!r})")
    return want


def _launch_reg(x2: torch.Tensor, amax_buf, seed, bufs, row: _View | None,
                col: _View | None) -> None:
    """The "reg" quantize pass (``quant_nvfp4_reg``); codes written as int32 words."""
    rows, cols = x2.shape
    cfg = CONFIG["REG"]
    br, bc = 16 * cfg["NI"], cfg["BC"]
    n_tc = triton.cdiv(cols, bc)
    n_tiles = triton.cdiv(rows, br) * n_tc
    grid = (persistent_grid(n_tiles, x2.device, cfg["PROGS_PER_SM"]),)
    (qr, sr, br_), (qc, sc, bc_) = [(c.view(torch.int32), sb, b) for c, sb, b in bufs]
    nvfp4_rowcol_reg_kernel[grid](
        x2, amax_buf, seed, qr, sr, br_, qc, sc, bc_, rows, cols, n_tc, n_tiles,
        IN_DTYPE_CODE[x2.dtype], cfg["NI"], bc, rows % br == 0 and cols % bc == 0,
        row is not None, row.sr_mode if row else 0, col is not None, bool(col and col.rht),
        col.sr_mode if col else 0, RHT_SIGN_MASK, cfg["NUM_STAGES"], num_warps=cfg["num_warps"],
        **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))


def _run(x: torch.Tensor, row: _View | None, col: _View | None, op: str):
    """Launch the amax pass (if needed) and the quantize pass; return (amax_row, amax_col)."""
    x2 = x.reshape(-1, x.shape[-1])
    rows, cols = x2.shape
    dev = x.device
    pass_ = _choose_pass(row, col, op)
    m = rht_matrix_on(16, dev)
    amax_buf, amaxes = _amax_pass(x2, row, col, m, pass_ == "reg")
    views = [v if v is not None else _NoView(dev) for v in (row, col)]
    philox = [v for v in (row, col) if v is not None and v.sr_mode == 2]
    seed = kernel_seed(philox[0].opts, dev) if philox else x2  # x2: never read
    if pass_ == "reg":
        bufs = [(v.codes, v.scale.view(torch.uint8), v.bits if v.bits is not None else x2)
                for v in views]
        _launch_reg(x2, amax_buf, seed, bufs, row, col)
        return amaxes
    rows_pass = pass_ == "rows"
    cfg = CONFIG if rows_pass else {**CONFIG, **CONFIG["V3"]}
    n_tc = triton.cdiv(cols, cfg["BC"])
    n_tiles = triton.cdiv(rows, cfg["BR"]) * n_tc
    grid = (persistent_grid(n_tiles, dev, cfg["PROGS_PER_SM"]),)
    kernel = nvfp4_rows_kernel if rows_pass else _nvfp4_quant_kernel
    bufs = [(v.codes if rows_pass else v.codes.view(torch.int32), v.scale.view(torch.uint8),
             v.bits if v.bits is not None else x2) for v in views]
    kernel[grid](
        x2, amax_buf, m, seed, *bufs[0], *bufs[1], rows, cols, n_tc, n_tiles,
        IN_DTYPE_CODE[x.dtype], cfg["BR"], cfg["BC"],
        row is not None, bool(row and row.rht), bool(row and row.block_2d),
        row.sr_mode if row else 0,
        col is not None, bool(col and col.rht), bool(col and col.block_2d),
        col.sr_mode if col else 0, cfg["NUM_STAGES"],
        num_warps=cfg["num_warps"])
    return amaxes


@register_kernel("quantize", QFormat.NVFP4.value)
def quantize_nvfp4_triton(x: torch.Tensor, **opts) -> QuantizedTensor:
    """Kernel twin of :func:`microscale.quant.quantize_nvfp4` (same signature)."""
    block_2d = bool(opts.get("block_2d", False))
    check_input(x, "nvfp4", 16, 16 if block_2d else 1, opts.get("check_finite", True))
    check_kernel_input(x)
    x2 = x.reshape(-1, x.shape[-1])
    view = _View(x2, opts, transposed=False)
    amax, _ = _run(x, view, None, "quantize")
    return view.result(amax, x.shape, x.dtype)


def quantize_rowcol_nvfp4_triton(x: torch.Tensor, row, col):
    """Kernel twin of ``ops.rowcol_reference`` for NVFP4 views (either may be None)."""
    x2 = x.reshape(-1, x.shape[-1])
    check_views(x2, row, col, lambda fmt, opts: (16, 16 if opts.get("block_2d") else 1))
    check_kernel_input(x)
    rv = _View(x2, row[1], False) if row else None
    cv = _View(x2, col[1], True) if col else None
    amax_r, amax_c = _run(x, rv, cv, "quantize_rowcol")
    rows, cols = x2.shape
    return (rv.result(amax_r, torch.Size((rows, cols)), x.dtype) if rv else None,
            cv.result(amax_c, torch.Size((cols, rows)), x.dtype) if cv else None)


for _key in ("nvfp4|nvfp4", "nvfp4|none", "none|nvfp4"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_nvfp4_triton)
