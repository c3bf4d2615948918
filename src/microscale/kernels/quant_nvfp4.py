"""Fused NVFP4 quantization (SPEC §2-§5), bit-exact with ``quant.nvfp4``: the host side.

Two launches per call:

1. **amax pass** -- one read of x, reduced to ``max|v|`` per view into a 2-slot fp32 buffer
   (slot 0: the row view, slot 1: the column view; after the RHT where the view has one).
   Skipped for a view whose ``amax`` is given.
2. **quantize pass** -- one more read of x; both views from each tile. Three passes, all
   bit-identical, chosen by :func:`.quant_nvfp4_passes.choose_pass` (``CONFIG['PASS']``)
   and reported by ``ms.explain()``:

   * ``reg`` (``quant_nvfp4_reg``, the default): a column's 16-row block in one thread's
     registers (RHT butterfly and packing in-thread); takes 1x16 row views without RHT (RNE,
     and SR if ``CONFIG['REG']['ROW_SR']``) and 1x16 column views with or without RHT;
   * ``rows`` (``quant_nvfp4_rows``): the column view as rows of the tile transposed through
     shared memory; every option (2D weights, RHT on rows); what ``reg`` falls back to;
   * ``v3`` (``quant_nvfp4_v3``): the column view without transposes, blocks across lanes.

   Under ``reg``, a bf16/fp16 row view alone (``ms.quantize``'s 1x16 view; a split pair's
   second launch, and the forward's x with the recompute, written expanded) runs the row kernel
   (``quant_nvfp4_row``, a 16-element block in one thread; ``CONFIG['ROW1']``).

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

import torch
import triton

from ..backend import KernelUnsupported, register_kernel
from ..op_specs import PROLOGUES
from ..quant.common import check_given_scalar, check_input
from ..tensor import QFormat, QuantizedTensor
from .quant_nvfp4_config import CONFIG
from .quant_nvfp4_passes import choose_pass, row_exp_code, row_kernel_takes
from .quant_nvfp4_reg import RHT_SIGN_MASK, nvfp4_amax_reg_kernel, nvfp4_rowcol_reg_kernel
from .quant_nvfp4_row import nvfp4_row_kernel
from .quant_nvfp4_rows import nvfp4_rows_kernel
from .quant_nvfp4_v3 import nvfp4_amax_kernel, nvfp4_v3_kernel
from ._utils import (IN_DTYPE_CODE, cdiv, check_kernel_input, check_rand_bits, check_views,
                     kernel_seed, persistent_grid, placeholder, rht_matrix_on, take_prologue)

__all__ = ["quantize_nvfp4_triton", "quantize_rowcol_nvfp4_triton", "CONFIG"]

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
        self.dtype = x2.dtype
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
                                PAIRS=cfg.get("PAIRS", False), num_warps=cfg["num_warps"],
                                **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))
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
    elif not any(need) and (row is not None or col is not None):
        amax_buf = _given_pair(*(None if v is None else v.amax for v in (row, col)))
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
            if any(need):
                amax_buf[i].copy_(given)
            amaxes.append(given)
        else:
            amaxes.append(amax_buf[i])
    return amax_buf, amaxes, ()


def _given_pair(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    """The fp32 ``[2]`` buffer the launches read (slot 0 the row view's amax, 1 the column
    view's) of given amaxes (None: no such view): the pair itself where they are its two
    neighbouring elements (a GEMM's ``ops_gemm.mm_amax`` output: no copy), else the two
    stacked (one amax in both slots for a single view)."""
    if a is None or b is None:
        a = b = b if a is None else a
    elif a.dtype == b.dtype == torch.float32 and a.numel() == b.numel() == 1 \
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() \
            and b.storage_offset() == a.storage_offset() + 1:
        return a.as_strided((2,), (1,))
    return torch.stack((a.float().reshape(()), b.float().reshape(())))


def _launch_reg(x2: torch.Tensor, amax_buf, seed, bufs, row: _View | None,
                col: _View | None, pro=(None, 0), parts=(), unclamped: bool = False) -> None:
    """The "reg" quantize pass (``quant_nvfp4_reg``) of ``row`` and/or ``col`` (None: not
    quantized by this launch; its slot in ``bufs`` is never touched). ``bufs``: per slot the
    codes as the kernel writes them (int32 words, or bf16 for an expanded view), the scale
    bytes and the caller's random bytes (or x2). ``pro``: the prologue ``(y, code)``;
    ``parts``: :func:`_amax_pass`'s, when ``amax_buf`` holds per-program maxima.
    ``unclamped``: ``amax_buf``'s row slot is ``max|x|`` as the amax pass measured it, so a
    column view alone may rotate without the RHT's clamp where that allows
    (``COL_UNCLAMPED``)."""
    if col is None and row_kernel_takes(row, row.expanded):
        return launch_row(x2, amax_buf, seed, bufs[0], row.sr_mode, row_exp_code(row.expanded),
                          CONFIG["ROW1"], pro, parts, row.rht)
    rows, cols = x2.shape
    cfg = CONFIG["REG"] if row is not None and col is not None else \
        CONFIG["REG_ROW"] if row is not None else CONFIG["REG_COL"]
    if row is None and col.sr_mode == 0:          # a column view alone, rounded to nearest
        cfg = {**cfg, **cfg.get("RNE", {})}
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
        FAST_E2M1=CONFIG["FAST_E2M1"], PREFETCH=cfg.get("PREFETCH", False),
        PHILOX_WIDE=cfg.get("PHILOX_WIDE", False), COL_UNCLAMPED=unclamped,
        num_warps=cfg["num_warps"], **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))


def launch_row(x2, amax_buf, seed, out: tuple, sr_mode: int, exp_code: int, cfg: dict,
               pro=(None, 0), parts=(), rht: bool = False) -> None:
    """Launch :func:`nvfp4_row_kernel` over ``x2 [rows, cols]`` at ``cfg``'s tile (``BR``,
    ``NB``, ``num_warps``, ``PROGS_PER_SM``, ``NUM_STAGES``, optional ``maxnreg``; codes with
    ``cfg["SR_CODES"]``'s, ``cfg["RHT_CODES"]``'s (rotated, RNE) or ``cfg["RNE_CODES"]``'s keys
    over those) and switches
    (``NAN_TILE``, ``STORE64``, ``PREFETCH``: the next tile's words loaded first,
    ``PHILOX_WIDE``: Philox's products as wide multiplies, ``SR_PRMT``: SR codes' bytes placed
    by a byte permute); ``out``:
    ``(codes or expanded values, scale bytes, caller's random bytes or any tensor)``; ``pro``,
    ``parts`` as ``quant_nvfp4``'s reg-pass launches take them (the prologue, the amax pass's
    maxima); ``rht``: the 16-point RHT of each block first (codes, no Philox, no prologue)."""
    if exp_code == 0:
        key = "SR_CODES" if sr_mode else "RHT_CODES" if rht and "RHT_CODES" in cfg else "RNE_CODES"
        cfg = {**cfg, **cfg.get(key, {})}
    rows, cols = x2.shape
    n_tc = cdiv(cols // 16, cfg["NB"])
    n_tiles = cdiv(rows, cfg["BR"]) * n_tc
    grid = (persistent_grid(n_tiles, x2.device, cfg["PROGS_PER_SM"]),)
    nvfp4_row_kernel[grid](
        x2, amax_buf, seed, *out, rows, cols, n_tc, n_tiles, IN_DTYPE_CODE[x2.dtype],
        cfg["BR"], cfg["NB"], sr_mode, exp_code,
        rows % cfg["BR"] == 0 and (cols // 16) % cfg["NB"] == 0, cfg["NUM_STAGES"], *pro,
        *parts[:3], NAN_TILE=cfg.get("NAN_TILE", False), STORE64=cfg.get("STORE64", False),
        RHT=rht, PREFETCH=cfg.get("PREFETCH", False),
        PHILOX=int(cfg.get("PHILOX_WIDE", False)) | 2 * int(cfg.get("SR_PRMT", False)),
        num_warps=cfg["num_warps"],
        **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))


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
         expand=(False, False), prologue=None, col_amax: _View | None = None):
    """Launch the amax pass (if needed) and the quantize pass(es); return (amax_row,
    amax_col). ``x2``: the input as ``[rows, cols]``. ``expand``: views to write expanded
    where the pass does (rows and split: both; reg: the row view, a column view alone, and a
    column view beside a row view where ``CONFIG['REG']['COL_EXP']`` says). ``prologue``
    ``(name, y)``: the views of ``op(x2, y)``, applied as the reg pass and its amax pass load
    (they take any view that pass takes), else computed first. ``col_amax`` (``col`` None): a
    column view whose amax alone the amax pass measures beside the row view's (amax_col)."""
    dev = x2.device
    # a row view with the RHT takes its amax from the v3 amax pass, which applies no
    # prologue: its op is computed first, whichever pass quantizes
    row_rht = row is not None and row.rht
    pass_ = choose_pass(row, col, op, expand, prologue[0] if prologue and not row_rht else "",
                        col_amax is not None)
    x2, prologue = take_prologue(x2, prologue, pass_ in ("reg", "split") and not row_rht)
    pro = (None, 0) if prologue is None else \
        (x2 if prologue[1] is None else prologue[1], PROLOGUES[prologue[0]][2])
    # the reg pass writes a column view expanded where it runs alone (as a split pair's first
    # launch does), beside a row view only with REG["COL_EXP"] (that launch spills)
    reg_col = pass_ == "reg" and (row is None or CONFIG["REG"].get("COL_EXP", False))
    can = (pass_ in ("reg", "rows", "split"), pass_ in ("rows", "split") or reg_col)
    for v, want, ok in zip((row, col), expand, can):
        if v is not None:
            v.allocate(dev, bool(want and ok))
    m = rht_matrix_on(16, dev)
    # the reg layout's amax pass measures any view but a row view with the RHT, also for the
    # pairs whose quantize pass falls back to "rows" (dy: SR rows; 2D weights)
    reg_amax = CONFIG["PASS"] == "reg" and not row_rht
    measured = col if col_amax is None else col_amax
    partial = CONFIG["AMAX_PARTIALS"] and reg_amax and pass_ != "v3" \
        and all(v is None or v.amax is None for v in (row, measured))
    amax_buf, amaxes, parts = _amax_pass(x2, row, measured, m, reg_amax, pro, partial)
    if col_amax is not None:  # no launch quantizes it: reduce the per-program maxima here
        amaxes[1] = amax_buf.view(-1, 2)[:, 1].amax() if parts else amax_buf[1]
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
        # the amax pass measured max|x| for the row view: the column view may skip the
        # RHT's clamp where that maximum allows (fp16 never needs it)
        unclamped = CONFIG["COL_UNCLAMPED"] and reg_amax and row.amax is None and col.rht \
            and x2.dtype != torch.float16
        _launch_reg(x2, amax_buf, seed, bufs, None, col, pro, parts, unclamped)
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
                                 prologue=None, col_amax=None):
    """Kernel twin of ``ops.rowcol_reference`` for NVFP4 views (either may be None);
    ``expand`` (a dispatch hint): views to write expanded where the pass can; ``prologue`` (a
    hint, ``(name, x2)``): the views of ``op(x, x2)`` (``op_specs.PROLOGUES``), fused into the
    reg pass's loads (and its amax pass's), applied first otherwise; ``col_amax`` (a hint, with
    ``col`` None: a column view ``(format, options)``): its amax measured by the amax pass
    beside the row view's, returned in the column view's place as a 0-d fp32 tensor (the
    reference's ``quant.nvfp4.nvfp4_amax`` of xᵀ)."""
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    check_views(x2, row, col, _block_of)
    check_kernel_input(x)
    rv = _View(x2, row[1], False) if row else None
    cv = _View(x2, col[1], True) if col else None
    av = _View(x2, col_amax[1], True) if col_amax is not None and not col else None
    if av is not None and rv is None:      # (the op validates the view: amax_only_view)
        raise KernelUnsupported("a measured column amax without a row view")
    amax_r, amax_c = _run(x2, rv, cv, "quantize_rowcol", expand, prologue, av)
    rows, cols = x2.shape
    if av is not None:
        return rv.result(amax_r, torch.Size((rows, cols)), x.dtype) if rv else None, amax_c
    return (rv.result(amax_r, torch.Size((rows, cols)), x.dtype) if rv else None,
            cv.result(amax_c, torch.Size((cols, rows)), x.dtype) if cv else None)


def _block_of(fmt, opts) -> tuple[int, int]:
    return 16, 16 if opts.get("block_2d") else 1


quantize_rowcol_nvfp4_triton.hints = ("expand", "prologue", "col_amax")
for _key in ("nvfp4|nvfp4", "nvfp4|none", "none|nvfp4"):
    register_kernel("quantize_rowcol", _key)(quantize_rowcol_nvfp4_triton)
