"""Fused NVFP4 quantization (SPEC §2-§5), bit-exact with ``quant.nvfp4``: the host side.

Two launches per call:

1. **amax pass** -- one read of x, reduced to ``max|v|`` per view into a 2-slot fp32 buffer
   (slot 0: the row view, slot 1: the column view; after the RHT where the view has one).
   Skipped for a view whose ``amax`` is given.
2. **quantize pass** -- one more read of x; both views from each tile. Three passes, all
   bit-identical, chosen by :func:`_choose_pass` (``CONFIG['PASS']``) and reported by
   ``ms.explain()``:

   * ``reg`` (``quant_nvfp4_reg``, the default): a column's 16-row block in one thread's
     registers (RHT butterfly and packing in-thread); takes 1x16 row views without RHT (RNE,
     and SR if ``CONFIG['REG']['ROW_SR']``) and 1x16 column views with or without RHT;
   * ``rows`` (``quant_nvfp4_rows``): the column view as rows of the tile transposed through
     shared memory; every option (2D weights, RHT on rows); what ``reg`` falls back to;
   * ``v3`` (``quant_nvfp4_v3``): the column view without transposes, blocks across lanes.

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

from ..backend import KernelUnsupported, note_path, register_kernel, rowcol_key
from ..op_specs import PROLOGUES
from ..quant.common import check_given_scalar, check_input
from ..tensor import QFormat, QuantizedTensor
from .quant_nvfp4_reg import RHT_SIGN_MASK, nvfp4_amax_reg_kernel, nvfp4_rowcol_reg_kernel
from .quant_nvfp4_rows import nvfp4_rows_kernel
from .quant_nvfp4_v3 import nvfp4_amax_kernel, nvfp4_v3_kernel
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_rand_bits, check_views,
                     kernel_seed, persistent_grid, placeholder, rht_matrix_on, take_prologue)

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
# pass ran the dy pair faster on an H100 in session 7); "REG_AMAX": its amax pass's, 3 programs
# an SM because that is what fits: 152 registers a thread, 3 CTAs of 4 warps (Nsight Compute,
# H100, Triton 3.6, session 18 call 1: 4 asked ran as 1.33 waves); 3 ran the x pair 3.5% and the
# 8192-wide pairs 2.3-2.7% faster, graph-replayed (call 2). SPLIT: a
# pair the reg pass refuses only for its SR row view (dy) runs as two reg-pass launches, the
# column view and then the row view alone, whose SR fits the registers without the column
# view beside it (same bits). Offline SASS (Triton 3.6) counts 55 + 50 instructions an
# element against the rows pass's 193, but the 125m nvfp4 step ran 1.7% slower with it (H100,
# session 14 call 6: 0.549x against 0.558x of bf16; x2 read twice, two launches a pair), so
# it was off until session 16 put it on for wide inputs only (below).
# SPLIT_MIN_COLS: with SPLIT, only pairs whose input is at least this wide split. Session 16
# (H100, graph-replayed, 16384 rows, bench_quant nvfp4/rowcol_dy): the rows pass is faster up
# to 2048 columns (116 against 134 µs at 768, 278 against 290 at 2048), level at 3072, the
# split 2.3% faster at 6144 and 3.9% at 8192; 1b nvfp4 step 0.772x (rows) -> 0.774x (split at
# every width) -> 0.776x (split above 4096 columns; call 11). Session 19 rounds the expanded
# views' E2M1 values in floating point (``_e2m1``: 55 -> 38.5 and 50 -> 35 SASS instructions
# an element for the two launches, against 193 -> 162 for the rows pass), and the split now
# wins at every width (H100, graph-replayed: 768 92 against 95 µs, 2048 204 against 219, 8192
# 708; call 1): so 0, every SR dy pair splits.
# SPLIT_EXP_COL: a pair whose column view is asked for expanded (nvfp4_no_sr's dy, RNE) splits
# too (both launches write their view expanded), instead of going to the rows pass (at most
# EXP_COL_ROWS_MAX_COLS wide) or to the reg pass plus a decode pass (wider). Session 19,
# offline SASS: 28.6 + 24.1 instructions an element for the two launches, against 50.6 and a
# 56-byte spill for the reg pass writing both views (REG['COL_EXP'] below).
# EXP_COL_ROWS_MAX_COLS: a pair whose column view is asked for expanded (nvfp4_no_sr's dy: the
# wgrad operand) and whose input is at most this wide goes to the rows pass, which writes that
# view expanded, instead of the reg pass plus a decode pass (0: never). Session 16, H100,
# graph-replayed, 16384 rows (bench_quant nvfp4/rowcol_dy_nosr): rows pass 14% faster at 768
# columns, 6-7% at 2048-3072; the reg pass 3.5% faster at 6144, 13% at 8192. Steps: 125m
# nvfp4_no_sr 0.624x -> 0.641x of bf16 (every width on the rows pass), 1b 0.789x -> 0.785x
# (its 6144/8192-wide dy too: hence the bound).
# REG["COL_EXP"]: the reg pass writes a column view asked for expanded itself (bf16 value ·
# scale: nvfp4_no_sr's dy pairs), not codes the op then decodes in a pass of its own. Off:
# same bits, but the kernel spills (64 B of stack, offline SASS) and the steps ran slower
# (H100, session 15 call 12: nvfp4_no_sr 0.574x -> 0.520x at 125m, 0.742x -> 0.686x at 1b).
CONFIG = {"BR": 32, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 16, "NUM_STAGES": 2,
          "V3": {"BR": 64, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 8},
          "REG": {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 2, "NUM_STAGES": 1,
                  "maxnreg": None, "ROW_SR": False, "COL_EXP": False},
          # REVERSE: the amax pass walks the tiles backwards, so the quantize pass after it
          # starts where it ended, on tiles still in L2 (session 20)
          "REG_AMAX": {"NI": 16, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 3, "NUM_STAGES": 2,
                       "REVERSE": True},
          # REG_ROW / REG_COL: the tile and launch of a reg-pass launch that carries one view
          # (a row view alone, a column view alone: single views and each launch of a split
          # pair). A row view alone loads two of its 16 raw tiles at a time (58-118 registers
          # a thread, against 121-246 with all 16 live), so more programs fit. Session 21
          # (H100, graph-replayed, 8192², amax given, every config bit-identical, call 2): the
          # column view alone ran 122 -> 120 µs (RHT) and 202 -> 159 µs (RHT + SR) at
          # [256, 32] tiles, 3 programs an SM, 2 stages, against the pair's [256, 64], 2, 1;
          # the row view alone (two raw tiles live) at 6 programs an SM (call 3): SR 172 ->
          # 154 µs, the SR dy pair's two launches 353 -> 314 µs (RNE codes: 114 -> 126).
          "REG_ROW": {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 6, "NUM_STAGES": 1,
                      "maxnreg": None},
          "REG_COL": {"NI": 16, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 3, "NUM_STAGES": 2,
                      "maxnreg": None},
          "SPLIT": True, "SPLIT_MIN_COLS": 0, "SPLIT_EXP_COL": True, "SPLIT_SR_COL": True,
          # SPLIT_X_MAX_COLS: every other pair (the x pair: a round-to-nearest row view,
          # written expanded, beside the RHT'd column view) splits too where its input is at
          # most this wide (0: never). Its one launch holds all 16 raw tiles for both views
          # (offline SASS, Triton 3.9: 255 registers and 480 bytes of stack a thread, 2
          # programs an SM); split, the column view alone runs at 3 and the row view alone at
          # 6 (65 registers), x read once more. H100, session 25 call 4 (profiled, same
          # process): the 125m x pairs at 768 columns 3.27 -> 2.91 ms a step, with relu²'s
          # prologue at 3072 3.87 -> 3.93 ms (step 0.703x -> 0.707x of bf16 splitting both);
          # 1b (2048 / 8192) 0.872x -> 0.859x. So only narrow inputs split.
          "SPLIT_X_MAX_COLS": 1024,
          "EXP_COL_ROWS_MAX_COLS": 4096,
          "AMAX_BR": 64, "AMAX_BC": 64, "AMAX_WARPS": 4, "AMAX_PROGS_PER_SM": 4,
          # AMAX_PARTIALS: the reg amax pass leaves per-program maxima that the quantize launches
          # reduce (_amax_pass): no zeroed [2] buffer and no copy of the column view's amax (the
          # op's outputs may not share storage) per call, ~340 small kernels of a 125m step.
          "AMAX_PARTIALS": True,
          # AMAX_UNCLAMPED: the reg amax pass rotates a column view without the RHT's input
          # clamp to ±2^125 (two instructions an element) and checks max|x| per program
          # instead, clamping only where a program saw a larger value or an Inf (the same
          # bits: nvfp4_amax_reg_kernel). Session 28, H100, one process: 125m nvfp4 0.7437x ->
          # 0.7456x of compiled bf16, nvfp4_no_sr 0.758x -> 0.760x; bench_train
          # "@no-amax-unclamped" turns it off.
          "AMAX_UNCLAMPED": os.environ.get("MICROSCALE_NVFP4_AMAX_UNCLAMPED", "1") != "0",
          # EXP_NAN_MAX: an expanded row view (reg pass) takes each block's maximum with NaN
          # kept instead of selecting NaN to 0 per element first (a NaN block's values are all
          # NaN either way, through its NaN scale byte): offline SASS (Triton 3.9, sm_90) 23.0
          # -> 19.8 instructions an element for the row view alone, SR 34.2 -> 30.8, SR with
          # relu²'s backward 42.6 -> 39.1 (session 27; same bits, GPU-tested in session 28,
          # H100 125m nvfp4 0.732x -> 0.737x of compiled bf16 in one process; bench_train
          # "@no-exp-nan-max" turns it off)
          "EXP_NAN_MAX": os.environ.get("MICROSCALE_NVFP4_EXP_NAN_MAX", "1") != "0",
          "PASS": os.environ.get("MICROSCALE_NVFP4_PASS", "reg")}
_PASSES = ("reg", "rows", "v3")

_OPTS = frozenset(("block_2d", "rht", "rht_d", "stochastic", "generator", "seed", "amax",
                   "rand_bits", "check_finite"))


# --------------------------------------------------------------------------- host side
class _View:
    """One requested view's options, validated; its output buffers come with :meth:`allocate`
    (once the pass is chosen, so an expanded view is allocated once, as bf16)."""

    def __init__(self, x2: torch.Tensor, opts: dict, transposed: bool):
        unknown = set(opts) - _OPTS
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
        self.shape = (cols, rows) if transposed else (rows, cols)
        self.bits = check_rand_bits(opts.get("rand_bits"), rows * cols, x2.device) \
            if self.stochastic else None
        self.amax = opts.get("amax")
        check_given_scalar(self.amax, "amax", "nvfp4", opts.get("check_finite", True))
        self.expanded = False

    def allocate(self, dev: torch.device, expanded: bool) -> None:
        """The codes (bf16 ``value · scale`` when ``expanded``, ``tensor.py``) and scales."""
        vr, vc = self.shape
        self.expanded = expanded
        self.codes = torch.empty(self.shape if expanded else (vr, vc // 2),
                                 dtype=torch.bfloat16 if expanded else torch.uint8, device=dev)
        self.scale = torch.empty((vr, vc // 16), dtype=torch.float8_e4m3fn, device=dev)

    @property
    def sr_mode(self) -> int:
        return 0 if not self.stochastic else (1 if self.bits is not None else 2)

    def result(self, amax: torch.Tensor, orig_shape, orig_dtype) -> QuantizedTensor:
        return QuantizedTensor(
            fmt=QFormat.NVFP4, data=self.codes, scale=self.scale, amax=amax, shape=orig_shape,
            orig_dtype=orig_dtype, block=(16, 16) if self.block_2d else (1, 16),
            rht_d=self.rht_d if self.rht else 0, extra={"stochastic": self.stochastic},
            expanded=self.expanded)


class _NoView:
    """Placeholder buffers for a view that is not requested (never written)."""

    def __init__(self, dev):
        self.codes = placeholder(torch.uint8, dev)
        self.scale = placeholder(torch.float8_e4m3fn, dev, 1)
        self.bits = None


def _reg_amax(x2: torch.Tensor, need, col_rht: bool, pro, partial: bool) -> torch.Tensor:
    """The register-layout amax kernel over the views in ``need``: a zeroed ``[2]`` buffer it
    raises by atomics, or (``partial``) ``[2 · programs]`` per-program maxima."""
    rows, cols = x2.shape
    cfg = CONFIG["REG_AMAX"]
    br, bc = 16 * cfg["NI"], cfg["BC"]
    n_tc = cdiv(cols, bc)
    n_tiles = cdiv(rows, br) * n_tc
    grid = (persistent_grid(n_tiles, x2.device, cfg["PROGS_PER_SM"]),)
    amax_buf = torch.empty(2 * grid[0], dtype=torch.float32, device=x2.device) if partial \
        else torch.zeros(2, dtype=torch.float32, device=x2.device)
    nvfp4_amax_reg_kernel[grid](x2, amax_buf, rows, cols, n_tc, n_tiles,
                                IN_DTYPE_CODE[x2.dtype], cfg["NI"], bc,
                                rows % br == 0 and cols % bc == 0, need[0], need[1], col_rht,
                                RHT_SIGN_MASK, cfg["NUM_STAGES"], cfg["REVERSE"], *pro,
                                PARTIAL=partial, UNCLAMPED=CONFIG["AMAX_UNCLAMPED"],
                                num_warps=cfg["num_warps"])
    return amax_buf


def _amax_pass(x2: torch.Tensor, row: _View | None, col: _View | None, m: torch.Tensor,
               reg: bool, pro=(None, 0), partial: bool = False):
    """``(buffer, amaxes, parts)``: the fp32 ``[2]`` buffer (slot 0 the row view's amax, slot 1
    the column view's), the two amax tensors to report (the given tensor when given) and
    ``()``, the quantize launches' trailing arguments.

    Measured by one kernel for the views without a given amax (``reg``: the register-layout
    amax kernel; ``pro``: its prologue ``(y, code)``, of ``op(x, y)``); given ones are copied
    in. ``partial`` (the reg amax kernel, no amax given; ``CONFIG['AMAX_PARTIALS']``): the
    buffer holds per-program maxima (``[2 · n]``), the amaxes are fresh 0-d outputs the
    quantize launches' program 0 writes, and ``parts`` is ``(n, NP, *amaxes)``: no zeroed
    buffer, no atomics, no copy of a column amax out of a shared buffer.
    """
    rows, cols = x2.shape
    dev = x2.device
    need = [v is not None and v.amax is None for v in (row, col)]
    if reg and any(need):
        amax_buf = _reg_amax(x2, need, bool(col and col.rht), pro, partial)
        if partial:
            n = amax_buf.numel() // 2
            outs = [torch.empty((), dtype=torch.float32, device=dev) if v is not None
                    else amax_buf for v in (row, col)]      # (an absent view's: never written)
            return amax_buf, outs, (n, triton.next_power_of_2(n), *outs)
    else:
        amax_buf = torch.zeros(2, dtype=torch.float32, device=dev)
    if any(need) and not reg:
        cfg = CONFIG
        n_tc = cdiv(cols, cfg["AMAX_BC"])
        n_tiles = cdiv(rows, cfg["AMAX_BR"]) * n_tc
        grid = (persistent_grid(n_tiles, dev, cfg["AMAX_PROGS_PER_SM"]),)
        nvfp4_amax_kernel[grid](x2, amax_buf, m, rows, cols, n_tc, n_tiles,
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
    return amax_buf, amaxes, ()


def row_exp_code(expanded: bool) -> int:
    """The reg kernels' ``ROW_EXP`` for a row view (dense and grouped): 0 codes, 1 expanded (NaN
    kept in the block maxima), 2 expanded with the per-element NaN select (``CONFIG
    ["EXP_NAN_MAX"]`` off)."""
    if not expanded:
        return 0
    return 1 if CONFIG["EXP_NAN_MAX"] else 2


def _reg_refusal(row: _View | None, col: _View | None, expand=(False, False)) -> str | None:
    """Why the "reg" pass cannot take these views (None: it can)."""
    if col is not None and expand[1] and col.shape[0] <= CONFIG["EXP_COL_ROWS_MAX_COLS"] \
            and not CONFIG["REG"].get("COL_EXP", False):
        return (f"a column view asked for expanded of an input at most "
                f"{CONFIG['EXP_COL_ROWS_MAX_COLS']} wide (EXP_COL_ROWS_MAX_COLS: the rows pass "
                f"writes it)")
    if row is not None and row.rht:
        return "a row view with the RHT"
    if row is not None and row.stochastic and col is not None and not CONFIG["REG"]["ROW_SR"]:
        return ("a stochastically rounded row view beside a column view (REG['ROW_SR'] is "
                "off; such a row view alone runs the reg pass, as a split pair's second "
                "launch does)")
    if any(v is not None and v.block_2d for v in (row, col)):
        return "16x16 (2D) scales"
    return None


def _splits(row: _View | None, col: _View | None, expand=(False, False)) -> bool:
    """Whether a pair goes as two launches (``CONFIG['SPLIT']``): the reg pass refuses it
    only for its stochastically rounded row view (dy) or, with ``SPLIT_EXP_COL``, for its
    column view asked for expanded (nvfp4_no_sr's dy), and takes each view alone. With
    ``SPLIT_SR_COL``, a round-to-nearest row view beside a stochastically rounded column view
    splits too: in one launch the two spill (255 registers and 368 bytes of stack a thread,
    Triton 3.6 offline SASS; 588 µs graph-replayed at 8192² on an H100 with the amax given,
    against 237 µs for the column view alone, session 21 call 1). Any other pair (the x
    pair) splits where its input is at most ``SPLIT_X_MAX_COLS`` wide."""
    if not (CONFIG["SPLIT"] and row is not None and col is not None) or row.rht \
            or row.block_2d or col.block_2d or col.shape[0] < CONFIG["SPLIT_MIN_COLS"]:
        return False
    sr_row = row.stochastic and not CONFIG["REG"]["ROW_SR"]
    exp_col = bool(expand[1]) and CONFIG["SPLIT_EXP_COL"] \
        and not CONFIG["REG"].get("COL_EXP", False)
    sr_col = col.stochastic and not row.stochastic and CONFIG["SPLIT_SR_COL"]
    return sr_row or exp_col or sr_col or col.shape[0] <= CONFIG["SPLIT_X_MAX_COLS"]


def _choose_pass(row: _View | None, col: _View | None, op: str, expand=(False, False),
                 prologue: str = "") -> str:
    """The pass that runs ("reg", "split", "rows" or "v3"), recorded for ``ms.explain()``
    (with ``prologue``, the op the reg pass applies as it loads; the others are given its
    result)."""
    want = CONFIG["PASS"]
    if want not in _PASSES:
        raise ValueError(f"quant_nvfp4.CONFIG['PASS'] (MICROSCALE_NVFP4_PASS) must be one of "
                         f"{_PASSES}, got {want!r}")
    key = rowcol_key(row and "nvfp4", col and "nvfp4") if op == "quantize_rowcol" else "nvfp4"
    why = _reg_refusal(row, col, expand) if want == "reg" else None
    fused = f"; {prologue} fused into its loads" if prologue else ""
    if want == "reg" and _splits(row, col, expand):
        note_path(op, key, "triton (NVFP4 pair split: two reg-pass launches, the column view, "
                  "then the row view alone" + fused + ")")
        return "split"
    if want == "reg" and why is None:
        note_path(op, key, "triton (NVFP4 reg pass: 16-row blocks in registers" + fused + ")")
        return "reg"
    if why is not None:
        note_path(op, key, f"triton (NVFP4 rows pass; the reg pass does not take {why})")
        return "rows"
    note_path(op, key, f"triton (NVFP4 {want} pass, PASS={want!r})")
    return want


def _launch_reg(x2: torch.Tensor, amax_buf, seed, bufs, row: _View | None,
                col: _View | None, pro=(None, 0), parts=()) -> None:
    """The "reg" quantize pass (``quant_nvfp4_reg``) of ``row`` and/or ``col`` (None: not
    quantized by this launch; its slot in ``bufs`` is never touched). ``bufs``: per slot the
    codes as the kernel writes them (int32 words, or bf16 for an expanded view), the scale
    bytes and the caller's random bytes (or x2). ``pro``: the prologue ``(y, code)``;
    ``parts``: :func:`_amax_pass`'s, when ``amax_buf`` holds per-program maxima."""
    rows, cols = x2.shape
    cfg = CONFIG["REG"] if row is not None and col is not None else \
        CONFIG["REG_ROW"] if row is not None else CONFIG["REG_COL"]
    br, bc = 16 * cfg["NI"], cfg["BC"]
    n_tc = cdiv(cols, bc)
    n_tiles = cdiv(rows, br) * n_tc
    grid = (persistent_grid(n_tiles, x2.device, cfg["PROGS_PER_SM"]),)
    (qr, sr, br_), (qc, sc, bc_) = bufs
    nvfp4_rowcol_reg_kernel[grid](
        x2, amax_buf, seed, qr, sr, br_, qc, sc, bc_, rows, cols, n_tc, n_tiles,
        IN_DTYPE_CODE[x2.dtype], cfg["NI"], bc, rows % br == 0 and cols % bc == 0,
        row is not None, row.sr_mode if row else 0, col is not None, bool(col and col.rht),
        col.sr_mode if col else 0, RHT_SIGN_MASK, cfg["NUM_STAGES"],
        row_exp_code(bool(row and row.expanded)), bool(col and col.expanded), *pro, *parts,
        num_warps=cfg["num_warps"], **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))


def _launch_rows(x2: torch.Tensor, amax_buf, m, seed, views, row: _View | None,
                 col: _View | None, pass_: str, parts=()) -> None:
    """The "rows" or "v3" quantize pass over the views given (``views``: both slots, a
    placeholder where a view is absent); ``parts`` as :func:`_launch_reg` (rows pass only)."""
    rows, cols = x2.shape
    rows_pass = pass_ == "rows"
    cfg = CONFIG if rows_pass else {**CONFIG, **CONFIG["V3"]}
    n_tc = cdiv(cols, cfg["BC"])
    n_tiles = cdiv(rows, cfg["BR"]) * n_tc
    grid = (persistent_grid(n_tiles, x2.device, cfg["PROGS_PER_SM"]),)
    kernel = nvfp4_rows_kernel if rows_pass else nvfp4_v3_kernel
    bufs = [(v.codes if rows_pass else v.codes.view(torch.int32), v.scale.view(torch.uint8),
             v.bits if v.bits is not None else x2) for v in views]
    kernel[grid](
        x2, amax_buf, m, seed, *bufs[0], *bufs[1], rows, cols, n_tc, n_tiles,
        IN_DTYPE_CODE[x2.dtype], cfg["BR"], cfg["BC"],
        row is not None, bool(row and row.rht), bool(row and row.block_2d),
        row.sr_mode if row else 0,
        col is not None, bool(col and col.rht), bool(col and col.block_2d),
        col.sr_mode if col else 0, cfg["NUM_STAGES"],
        *((bool(row and row.expanded), bool(col and col.expanded), *parts) if rows_pass else ()),
        num_warps=cfg["num_warps"])


def _run(x2: torch.Tensor, row: _View | None, col: _View | None, op: str,
         expand=(False, False), prologue=None):
    """Launch the amax pass (if needed) and the quantize pass(es); return (amax_row,
    amax_col). ``x2``: the input as ``[rows, cols]``. ``expand``: views to write expanded
    where the pass does (rows and split: both; reg: the row view, and the column view where
    ``CONFIG['REG']['COL_EXP']`` says). ``prologue`` ``(name, y)``: the views of ``op(x2,
    y)``, applied as the reg pass and its amax pass load (they take any view that pass
    takes), else computed first."""
    dev = x2.device
    pass_ = _choose_pass(row, col, op, expand, prologue[0] if prologue else "")
    x2, prologue = take_prologue(x2, prologue, pass_ in ("reg", "split"))
    pro = (None, 0) if prologue is None else \
        (x2 if prologue[1] is None else prologue[1], PROLOGUES[prologue[0]][2])
    reg_col = pass_ == "reg" and CONFIG["REG"].get("COL_EXP", False)
    can = (pass_ in ("reg", "rows", "split"), pass_ in ("rows", "split") or reg_col)
    for v, want, ok in zip((row, col), expand, can):
        if v is not None:
            v.allocate(dev, bool(want and ok))
    m = rht_matrix_on(16, dev)
    # the reg layout's amax pass measures any view but a row view with the RHT, also for the
    # pairs whose quantize pass falls back to "rows" (dy: SR rows; 2D weights)
    reg_amax = CONFIG["PASS"] == "reg" and not (row is not None and row.rht)
    partial = CONFIG["AMAX_PARTIALS"] and reg_amax and pass_ != "v3" \
        and all(v is None or v.amax is None for v in (row, col))
    amax_buf, amaxes, parts = _amax_pass(x2, row, col, m, reg_amax, pro, partial)
    views = [v if v is not None else _NoView(dev) for v in (row, col)]
    philox = [v for v in (row, col) if v is not None and v.sr_mode == 2]
    seed = kernel_seed(philox[0].opts, dev) if philox else x2  # x2: never read
    if pass_ in ("reg", "split"):             # bf16 codes: an expanded view, written as is
        bufs = [(v.codes if v.codes.dtype == torch.bfloat16 else v.codes.view(torch.int32),
                 v.scale.view(torch.uint8), v.bits if v.bits is not None else x2)
                for v in views]
    if pass_ == "reg":
        _launch_reg(x2, amax_buf, seed, bufs, row, col, pro, parts)
    elif pass_ == "split":                     # the column view, then the row view alone
        _launch_reg(x2, amax_buf, seed, bufs, None, col, pro, parts)
        _launch_reg(x2, amax_buf, seed, bufs, row, None, pro, parts)
    else:
        _launch_rows(x2, amax_buf, m, seed, views, row, col, pass_, parts)
    return amaxes


@register_kernel("quantize", QFormat.NVFP4.value)
def quantize_nvfp4_triton(x: torch.Tensor, **opts) -> QuantizedTensor:
    """Kernel twin of :func:`microscale.quant.quantize_nvfp4` (same signature)."""
    block_2d = bool(opts.get("block_2d", False))
    check_input(x, "nvfp4", 16, 16 if block_2d else 1, opts.get("check_finite", True))
    check_kernel_input(x)
    x2 = x.reshape(-1, x.shape[-1])
    view = _View(x2, opts, transposed=False)
    amax, _ = _run(x2, view, None, "quantize")
    return view.result(amax, x.shape, x.dtype)


def quantize_rowcol_nvfp4_triton(x: torch.Tensor, row, col, expand=(False, False),
                                 prologue=None):
    """Kernel twin of ``ops.rowcol_reference`` for NVFP4 views (either may be None);
    ``expand`` (a dispatch hint): views to write expanded where the pass can; ``prologue`` (a
    hint, ``(name, x2)``): the views of ``op(x, x2)`` (``op_specs.PROLOGUES``), fused into the
    reg pass's loads (and its amax pass's), applied first otherwise."""
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    check_views(x2, row, col, _block_of)
    check_kernel_input(x)
    rv = _View(x2, row[1], False) if row else None
    cv = _View(x2, col[1], True) if col else None
    amax_r, amax_c = _run(x2, rv, cv, "quantize_rowcol", expand, prologue)
    rows, cols = x2.shape
    return (rv.result(amax_r, torch.Size((rows, cols)), x.dtype) if rv else None,
            cv.result(amax_c, torch.Size((cols, rows)), x.dtype) if cv else None)


def _block_of(fmt, opts) -> tuple[int, int]:
    return 16, 16 if opts.get("block_2d") else 1


quantize_rowcol_nvfp4_triton.hints = ("expand", "prologue")
for _key in ("nvfp4|nvfp4", "nvfp4|none", "none|nvfp4"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_nvfp4_triton)
