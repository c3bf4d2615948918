"""Throughput of the fused quantization kernels against the device's copy rate, on one GPU.

    python benchmarks/bench_quant.py                 # 4096², 8192², 16384x4096, bf16
    python benchmarks/bench_quant.py --quick         # 8192² only
    python benchmarks/bench_quant.py --sweep         # also tile configs (8192²)
    python benchmarks/bench_quant.py --no-ref        # skip torch's reference timings

Quantization is memory-bound, so each variant is reported as time, GB/s of bytes *moved*
(every read of x -- NVFP4 reads it twice: the amax pass, then the quantize pass -- plus
codes and scales written) and that rate as % of the measured device-to-device copy rate
(also read + written). ``%copy@1read`` counts x once: the floor a single-pass design could
reach. ``ref/*`` rows time the pure-PyTorch reference on the same GPU. Inputs are random
bf16 (never zeros), ``check_finite=False`` (the training hot path), L2 flushed between calls.

Targets (issue 12, ``TARGETS_1READ``): at 8192² and 16384x4096, counting x once, NVFP4 1x16 RNE
>= 70% of the copy rate, the RHT or SR alone >= 60%, rows RNE + columns RHT+SR >= 50%, and SR
at <= 1.15x the RNE time. Prints one table per shape and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import microscale as ms  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (16384, 4096)]
NF = {"check_finite": False}


_AMAX: dict = {}


def _given(opts: dict, x: torch.Tensor) -> dict:
    """``amax="given"`` stands for a precomputed amax (times the quantize pass alone);
    ``seed="given"`` for a fixed SR seed on the device (the same bits every call)."""
    if opts.get("amax") == "given":
        if x.device not in _AMAX:      # made once: a per-call host-to-device copy would be timed
            _AMAX[x.device] = x.float().abs().amax()
        opts = {**opts, "amax": _AMAX[x.device]}
    if opts.get("seed") == "given":
        if ("seed", x.device) not in _AMAX:
            _AMAX["seed", x.device] = torch.tensor([5], dtype=torch.int32, device=x.device)
        opts = {**opts, "seed": _AMAX["seed", x.device]}
    return opts


def _master(x: torch.Tensor) -> torch.Tensor:
    """An fp32 copy of ``x``, made once (a weight's master copy is fp32; its conversion is
    not part of the quantizer's time)."""
    if ("fp32", x.data_ptr()) not in _AMAX:
        _AMAX["fp32", x.data_ptr()] = x.float()
    return _AMAX["fp32", x.data_ptr()]


def _rc(row, col):
    def call(x, be):
        views = [(v[0], _given(v[1], x)) if v else None for v in (row, col)]
        return ms.quantize_rowcol(x, views[0], views[1], backend=be)
    return call


def _views(row, col, prologue: str = ""):
    """As ``_rc``, through the op layer's ``quantize_views``, which also takes the layer-only
    option ``expand`` (views written as bf16 ``value · block_scale``, ``tensor.py``);
    ``prologue``: the views of ``op(x)`` (``op_specs.PROLOGUES``, one-source ops)."""
    from microscale.ops import quantize_views
    from microscale.tensor import QFormat
    def view(v, x):
        return None if v is None else (QFormat(v[0]), _given(v[1], x))
    return lambda x, be: quantize_views(x, view(row, x), view(col, x), be, prologue)


def _q(fmt, **opts):
    return lambda x, be: ms.quantize(x, fmt, backend=be, **NF, **_given(opts, x))


class _Maxima:
    """The NVFP4 amax pass's output as ``run_variant`` and ``_same`` read a view: ``data`` the
    two amaxes (row view's, column view's after the RHT) reduced from the per-program maxima
    on access, outside the timed calls (their count changes with the launch)."""

    def __init__(self, buf: torch.Tensor):
        self.buf = buf
        self.scale = buf[:0]

    @property
    def data(self) -> torch.Tensor:
        return self.buf.view(-1, 2).amax(0)

    amax = data


def _amax_pass(x, be):
    """The amax pass alone, as a training quantize call launches it before its quantize pass
    (``quant_nvfp4._reg_amax``: both views, the column one after its RHT, per-program maxima)."""
    from microscale.kernels import quant_nvfp4
    return _Maxima(quant_nvfp4._reg_amax(x, [True, True], True, (None, 0), True))


# name -> (call(x, backend), reads of x by the kernel path)
VARIANTS = {
    "nvfp4/rowcol_rht": (_rc(("nvfp4", NF), ("nvfp4", {**NF, "rht": True})), 2),
    "nvfp4/rowcol_rht_sr": (_rc(("nvfp4", {**NF, "stochastic": True}),
                                ("nvfp4", {**NF, "rht": True, "stochastic": True})), 2),
    "nvfp4/rowcol_rht@amax_given": (_rc(("nvfp4", {**NF, "amax": "given"}),
                                        ("nvfp4", {**NF, "rht": True, "amax": "given"})), 1),
    "nvfp4/rowcol_rht_sr@amax_given": (
        _rc(("nvfp4", {**NF, "stochastic": True, "amax": "given"}),
            ("nvfp4", {**NF, "rht": True, "stochastic": True, "amax": "given"})), 1),
    "nvfp4/rowcol_2d@amax_given": (_rc(("nvfp4", {**NF, "block_2d": True, "amax": "given"}),
                                       ("nvfp4", {**NF, "block_2d": True, "amax": "given"})), 1),
    # issue 12's pair: rows RNE + columns RHT and SR (x read once by the quantize pass)
    "nvfp4/rowcol_rne_rhtsr": (_rc(("nvfp4", NF),
                                   ("nvfp4", {**NF, "rht": True, "stochastic": True})), 2),
    "nvfp4/rowcol_rne_rhtsr@amax_given": (
        _rc(("nvfp4", {**NF, "amax": "given"}),
            ("nvfp4", {**NF, "rht": True, "stochastic": True, "amax": "given"})), 1),
    "nvfp4/col_rht": (_rc(None, ("nvfp4", {**NF, "rht": True})), 2),
    "nvfp4/col_rht@amax_given": (_rc(None, ("nvfp4", {**NF, "rht": True, "amax": "given"})), 1),
    "nvfp4/col_rht_sr": (_rc(None, ("nvfp4", {**NF, "rht": True, "stochastic": True})), 2),
    "nvfp4/col_rht_sr@amax_given": (_rc(None, ("nvfp4", {**NF, "rht": True, "stochastic": True,
                                                         "amax": "given", "seed": "given"})), 1),
    "nvfp4/1x16": (_q("nvfp4"), 2),
    "nvfp4/1x16@amax_given": (_q("nvfp4", amax="given"), 1),
    "nvfp4/1x16_sr": (_q("nvfp4", stochastic=True), 2),
    "nvfp4/1x16_sr@amax_given": (_q("nvfp4", stochastic=True, amax="given", seed="given"), 1),
    "nvfp4/1x16_rht": (_q("nvfp4", rht=True), 2),
    "nvfp4/1x16_rht@amax_given": (_q("nvfp4", rht=True, amax="given"), 1),
    "nvfp4/2d_weight": (_q("nvfp4", block_2d=True), 2),
    "mxfp8_e4m3/1x32": (_q("mxfp8_e4m3"), 1),
    "mxfp8_e4m3/rowcol": (_rc(("mxfp8_e4m3", NF), ("mxfp8_e4m3", NF)), 1),
    "mxfp4/1x32": (_q("mxfp4"), 1),
    "mxfp4/rht_sr": (_q("mxfp4", rht=True, stochastic=True), 1),
    # the mxfp4 recipe's pairs as a layer asks for them: x (row RNE written expanded, column
    # RHT 32 as codes, saved for backward) and dy (row SR, column RHT 32 + SR, both expanded)
    # the MXFP8 pairs a layer asks for since session 19: x (row view expanded, column codes)
    # and dy (both expanded); "mxfp8_e4m3/rowcol" is the same pair as codes
    "mxfp8/rowcol_x": (_views(("mxfp8_e4m3", {**NF, "expand": True}), ("mxfp8_e4m3", NF)), 1),
    "mxfp8/rowcol_dy": (_views(("mxfp8_e4m3", {**NF, "expand": True}),
                               ("mxfp8_e4m3", {**NF, "expand": True})), 1),
    "mxfp4/rowcol_x": (_views(("mxfp4", {**NF, "expand": True}), ("mxfp4", {**NF, "rht": True})),
                       1),
    "mxfp4/rowcol_dy": (_views(("mxfp4", {**NF, "stochastic": True, "expand": True,
                                          "seed": "given"}),
                               ("mxfp4", {**NF, "rht": True, "stochastic": True, "expand": True,
                                          "seed": "given"})),
                        1),
    # the nvfp4 recipe's pairs as a layer asks for them: x (row RNE written expanded, column
    # RHT 16 as codes, saved for backward) and dy (row SR, column RHT 16 + SR, both expanded)
    "nvfp4/rowcol_x": (_views(("nvfp4", {**NF, "expand": True}), ("nvfp4", {**NF, "rht": True})),
                       2),
    "nvfp4/rowcol_dy": (_views(("nvfp4", {**NF, "stochastic": True, "expand": True,
                                          "seed": "given"}),
                               ("nvfp4", {**NF, "rht": True, "stochastic": True, "expand": True,
                                          "seed": "given"})),
                        2),
    # a row view alone written expanded, amax given (session 40): the forward's x row view
    # (RNE) with the recompute, and a split dy pair's second launch (SR)
    "nvfp4/row_exp@amax_given": (_views(("nvfp4", {**NF, "expand": True, "amax": "given"}),
                                        None), 1),
    "nvfp4/row_exp_sr@amax_given": (_views(("nvfp4", {**NF, "stochastic": True, "expand": True,
                                                      "amax": "given", "seed": "given"}), None),
                                    1),
    # session 52: the two column views of a 1b MLP's 16384x8192 tensors as training runs
    # them (Nsight Compute, session 52 call 1): the down projection's input relu²(u),
    # recomputed in backward from u (RNE, RHT, written expanded; REG_COL["RNE"]'s tile), and
    # the up projection's gradient du (RHT + SR, expanded; REG_COL's tile); amax given
    "nvfp4/col_relu2_exp@amax_given": (
        _views(None, ("nvfp4", {**NF, "rht": True, "expand": True, "amax": "given"}),
               "relu_square"), 1),
    "nvfp4/col_rht_sr_exp@amax_given": (
        _views(None, ("nvfp4", {**NF, "rht": True, "stochastic": True, "expand": True,
                                "amax": "given", "seed": "given"})), 1),
    # the amax pass alone (session 50; its REG_AMAX launch is swept below)
    "nvfp4/amax_pass": (_amax_pass, 1),
    # nvfp4_no_sr's dy pair: row RNE and column RHT, both as the layer consumes them
    # (expanded: the reg pass writes codes for the column view, decoded after; the rows pass
    # writes both expanded itself)
    "nvfp4/rowcol_dy_nosr": (_views(("nvfp4", {**NF, "expand": True}),
                                    ("nvfp4", {**NF, "rht": True, "expand": True})), 2),
    "fp8_block/1x128": (_q("fp8_block"), 1),
    "fp8_block/1x128_rowcol": (_rc(("fp8_block", NF), ("fp8_block", NF)), 1),
    "fp8_block/128x128": (_q("fp8_block", block=(128, 128)), 1),
    # a weight's pair as a layer asks for it: its fp32 master, W and Wᵀ in 128x128 tiles
    # ("reads" 2: x's bf16 bytes twice, the fp32 master's once)
    "fp8_block/128x128_rowcol_fp32": (
        lambda x, be: ms.quantize_rowcol(_master(x), ("fp8_block", {**NF, "block": (128, 128)}),
                                         ("fp8_block", {**NF, "block": (128, 128)}), backend=be),
        2),
}
REFERENCE = ("nvfp4/rowcol_rht", "nvfp4/1x16", "mxfp8_e4m3/1x32", "fp8_block/1x128")


def _written(out) -> int:
    outs = out if isinstance(out, tuple) else (out,)
    return sum(q.data.nbytes + q.scale.nbytes + 4 for q in outs if q is not None)


graph_ms = common.graph_ms


def _same(out, want) -> bool:
    """Bit-identical outputs (data, scales, amax of every view)?"""
    outs, wants = (out, want) if isinstance(out, tuple) else ((out,), (want,))
    return all((a is None and b is None) or all(
        torch.equal(getattr(a, f).reshape(-1).view(torch.uint8),
                    getattr(b, f).reshape(-1).view(torch.uint8))
        for f in ("data", "scale", "amax")) for a, b in zip(outs, wants))


def run_variant(name: str, x: torch.Tensor, backend: str, copy_gbs: float,
                graph: bool = True) -> dict:
    call, reads = VARIANTS[name]
    out = call(x, backend)
    written = _written(out)
    ms_ = common.bench_ms(lambda: call(x, backend))
    g_ms = graph_ms(lambda: call(x, backend)) if graph and backend == "triton" else None
    moved = reads * x.nbytes + written
    ideal = x.nbytes + written
    gbs = moved / (ms_ * 1e-3) / 1e9
    return {"variant": ("ref/" if backend == "reference" else "") + name, "shape": tuple(x.shape),
            "us": ms_ * 1e3, "GB/s": gbs, "%copy": 100 * gbs / copy_gbs,
            "%copy@1read": 100 * ideal / (ms_ * 1e-3) / 1e9 / copy_gbs, "MB_moved": moved / 1e6,
            "us_graph": g_ms * 1e3 if g_ms else None,
            "%copy_graph": 100 * moved / (g_ms * 1e-3) / 1e9 / copy_gbs if g_ms else None,
            "%copy@1read_graph": 100 * ideal / (g_ms * 1e-3) / 1e9 / copy_gbs if g_ms else None}


def _keys_match(with_key: str, opt: dict) -> bool:
    """``--sweep-with``: one key the config sets, or ``A+B+...``: exactly these keys in this
    order (a plan's key order tells plans over the same keys apart)."""
    keys = with_key.split("+")
    return keys == list(opt) if len(keys) > 1 else with_key in opt


def sweep(x: torch.Tensor, copy_gbs: float, only: str = "", with_key: str = "") -> list[dict]:
    """Try tile shapes / warps of each kernel family on ``x``; restore the defaults after.
    ``only``: variant name prefixes; ``with_key``: only the plans whose configs set that key."""
    from microscale.kernels import quant_fp8, quant_mx, quant_nvfp4
    def cfgs(keys, values):
        return [dict(zip(keys, v)) for v in values]

    q_keys = ("BR", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES")
    rows_cfgs = cfgs(q_keys, [
        (32, 32, 4, 16, 2), (32, 32, 2, 16, 2), (32, 32, 4, 8, 2), (32, 32, 4, 32, 2),
        (32, 64, 4, 8, 2), (64, 32, 4, 8, 2), (64, 64, 4, 8, 2), (16, 64, 2, 16, 2)])
    reg_keys = ("NI", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES", "maxnreg", "ROW_SR")
    # the reg pass: NI·(lanes x warps along i) must cover the tile's groups once (4 lanes and
    # num_warps warps along i at BC = 64; 8 lanes at BC = 32)
    reg_cfgs = cfgs(reg_keys, [(16, 64, 4, 2, 1, None, True), (16, 64, 4, 1, 1, None, True),
                               (16, 64, 4, 3, 1, 168, True), (16, 64, 4, 2, 2, None, True),
                               (8, 64, 2, 4, 1, None, True), (8, 64, 2, 6, 1, 168, True),
                               (16, 64, 4, 4, 1, 128, True), (32, 32, 4, 2, 1, None, True)])
    amax_keys = ("NI", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES", "REVERSE")
    alone_keys = ("NI", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES", "maxnreg")
    plans = [
        # session 21: the tile of a reg-pass launch with one view (single views, each launch
        # of a split pair: issue 12's single views, the dy pairs, RNE rows + RHT/SR columns)
        # (REG_COL["RNE"] off: each tile runs as given, RNE column views included)
        *[(quant_nvfp4.CONFIG["REG_COL"], name, [c | {"RNE": {}} for c in cfgs(alone_keys, [
            (16, 64, 4, 2, 1, None), (16, 32, 4, 3, 1, None), (16, 32, 4, 4, 1, None),
            (16, 32, 4, 3, 2, None), (16, 64, 4, 3, 1, 168), (8, 64, 2, 4, 1, None),
            (32, 32, 4, 2, 1, None),
            # session 32: with FAST_E2M1's fewer registers (offline 255 -> 242), more programs
            (16, 32, 4, 4, 2, None), (16, 64, 4, 3, 2, None), (8, 32, 2, 6, 2, None),
            (8, 64, 2, 6, 2, None)])])
          for name in ("nvfp4/col_rht@amax_given", "nvfp4/col_rht_sr@amax_given")],
        # a row view alone holds two raw tiles at a time (58-118 registers): more programs
        *[(quant_nvfp4.CONFIG["REG_ROW"], name, cfgs(alone_keys, [
            (16, 64, 4, 2, 1, None), (16, 64, 4, 4, 1, None), (16, 64, 4, 6, 1, None),
            (16, 64, 4, 4, 2, None), (16, 64, 4, 8, 1, None), (8, 64, 2, 8, 1, None),
            (16, 32, 4, 8, 1, None), (32, 64, 8, 2, 1, None)]))
          for name in ("nvfp4/1x16@amax_given", "nvfp4/1x16_sr@amax_given", "nvfp4/rowcol_dy")],
        # session 31: a row view alone on the row kernel (quant_nvfp4_row, CONFIG["ROW1"]),
        # against the reg pass's row view (both switches off)
        *[(quant_nvfp4.CONFIG["ROW1"], name, cfgs(
            ("codes", "expanded", "BR", "NB", "num_warps", "PROGS_PER_SM", "NUM_STAGES"), [
                (False, False, 8, 8, 2, 32, 1), *[(True, True) + c for c in (
                    (16, 16, 4, 8, 1), (16, 16, 4, 8, 2), (8, 16, 4, 12, 1), (8, 16, 4, 16, 1),
                    (16, 8, 4, 16, 1), (32, 16, 8, 4, 1), (8, 8, 2, 32, 1))]]))
          for name in ("nvfp4/1x16@amax_given", "nvfp4/1x16_sr@amax_given", "nvfp4/rowcol_dy",
                       "nvfp4/1x16")],
        # session 32: the row kernel's switches (NAN_TILE: per-element NaN selects only in a
        # tile that holds a NaN; STORE64: one 8-byte code store, stores kept in the thread's
        # layout; both on since call 2) and tiles (the RNE_CODES / SR_CODES overrides off,
        # so the tile given is the tile run). Call 2 also timed SR fractions built from the
        # bits (dropped, slower)
        *[(quant_nvfp4.CONFIG["ROW1"], name, [c | {"RNE_CODES": {}, "SR_CODES": {}} for c in cfgs(
            ("BR", "NB", "num_warps", "PROGS_PER_SM", "NAN_TILE", "STORE64", "NUM_STAGES"), [
                (8, 8, 2, 32, False, False, 1), (8, 8, 2, 32, False, True, 1),
                (8, 8, 2, 32, True, True, 1), (8, 8, 1, 32, True, True, 1),
                (8, 4, 1, 32, True, True, 1), (8, 16, 2, 16, True, True, 1),
                (8, 16, 2, 16, False, True, 1), (16, 16, 4, 8, True, True, 1),
                (8, 32, 2, 8, True, True, 1),
                # session 32, call 7: around the SR default ([8, 4], 1 warp)
                (8, 4, 1, 32, True, True, 2), (4, 8, 1, 32, True, True, 1),
                (16, 2, 1, 32, True, True, 1), (8, 4, 1, 24, True, True, 1),
                (8, 8, 1, 32, True, True, 2), (8, 4, 1, 32, False, True, 1)])])
          for name in ("nvfp4/1x16@amax_given", "nvfp4/1x16_sr@amax_given")],
        # session 40: the row kernel loading the next tile's words while it quantizes this
        # one (PREFETCH), at tiles whose registers (offline, Triton 3.6) leave the programs
        # resident. Call 1 (H200, 8192², µs graph-replayed): RNE codes 70.2 at the default
        # ([8, 16], 2 warps, 16 programs) -> 60.5 at [4, 16], 1 warp, 24 programs; SR 86.2
        # ([4, 8], 1 warp, 32) -> 76.2 at [4, 16] / 24, 79.6 at [4, 8] / 32; the SR dy pair
        # with its row launch expanded on the row kernel 253.7 at [4, 8] / 32 against the reg
        # pass's 272.5. Call 2: around those, and the lone expanded row views (RNE codes 58.7
        # at [2, 32] / 24, SR 75.4; expanded RNE 95.0 on the reg pass, 85.0 at [4, 8] / 32,
        # SR 109.0 -> 87.7). Logs: results/h200_20261128_session40/call1, call2.
        # Call 3: a register cap (maxnreg) for more resident programs lost everywhere (RNE
        # codes at [2, 32] / 32 capped at 64 registers 66.7 µs, SR 94.5) or tied (expanded).
        # Call 4 (these): RNE codes around [2, 32] / 24 (79 registers): [1, 64] (78), two
        # warps at [2, 32] (61) and [4, 32] (80), 22 and 26 programs
        (quant_nvfp4.CONFIG["ROW1"], "nvfp4/1x16@amax_given", [
            c | {"RNE_CODES": {}, "SR_CODES": {}, "PREFETCH": True} for c in cfgs(
                ("BR", "NB", "num_warps", "PROGS_PER_SM"), [
                    (2, 32, 1, 24), (1, 64, 1, 24), (2, 32, 1, 22), (2, 32, 1, 26),
                    (2, 32, 2, 16), (4, 32, 2, 12), (2, 32, 1, 24)])]),
        # session 40 (offline only, not yet timed): the reg pass's column view alone with the
        # next tile loaded first (REG_COL["PREFETCH"]). Registers (Triton 3.6, sm_90, SR with
        # RHT, codes): [256, 32] / 4 warps 163 -> 224, [256, 16] 67 -> 95, [128, 32] / 2 warps
        # 163 -> 224; so narrower tiles with more programs
        *[(quant_nvfp4.CONFIG["REG_COL"], name, [c | {"RNE": {}} for c in cfgs(
            ("NI", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES", "PREFETCH"), [
                (16, 32, 4, 3, 2, False), (16, 16, 4, 7, 1, False), (16, 16, 4, 5, 1, True),
                (16, 16, 4, 4, 1, True), (16, 32, 4, 2, 1, True), (8, 32, 2, 4, 1, True)])])
          for name in ("nvfp4/col_rht_sr@amax_given", "nvfp4/col_rht@amax_given",
                       "nvfp4/rowcol_dy")],
        # session 43 (offline, Triton 3.6): a column view rounded to nearest (REG_COL["RNE"],
        # the x pairs' RHT'd column view) with its tile loop software-pipelined (cp.async:
        # [256, 32] 127 -> 128 registers, 4 -> 20 KB of shared memory; [256, 16] 72 registers,
        # 10 KB) or with PREFETCH ([256, 16] 80 registers), against its default. H200, call 5
        # (µs, col_rht@amax_given, 8192² / 16384x768 / 16384x2048): the old default [256,
        # 32] 85.9-86.4 / 27.2-27.4 / 50.7, two stages 88.5 / 28.5 / 51.7, [256, 16] PREFETCH
        # 86.2 / 25.7 / 48.7; session 40's plan's [128, 32], 2 warps, 4 programs, PREFETCH
        # 80.8 / 25.0 / 47.3, now RNE's default. rowcol_x does not run this tile above 1024
        # columns (one launch) and is level at 768 (its amax pass included).
        *[(quant_nvfp4.CONFIG["REG_COL"], name, [c | {"RNE": {}} for c in cfgs(
            ("NI", "BC", "num_warps", "PROGS_PER_SM", "NUM_STAGES", "PREFETCH"), [
                (16, 32, 4, 4, 1, False), (16, 32, 4, 4, 2, False), (16, 16, 4, 7, 2, False),
                (16, 16, 4, 7, 1, False), (16, 16, 4, 6, 1, True), (16, 16, 4, 7, 1, True),
                (16, 32, 4, 4, 1, False)])])
          for name in ("nvfp4/col_rht@amax_given", "nvfp4/rowcol_x")],
        # session 41: Philox's products as wide multiplies (ROW1's PHILOX_WIDE), on and off at
        # the default tiles. Calls 1 and 3 (H200, 8192², µs graph-replayed) ran this as a
        # "PACK" key, PHILOX_WIDE then its bit 1: the expanded SR row view 103.2 -> 87.8, SR
        # codes 75.4 -> 75.1. Its bit 2 (code words packed from the grid bits: RNE codes 591
        # -> 554 instructions, 95 registers) slowed RNE codes 58.9 -> 70.6 at 24 programs an
        # SM and ran level at 20 (call 4: 58.8), so it was dropped. Then the SR codes' tile
        # at 94 registers (21 programs of one warp fit an SM; 24 are launched)
        *[(quant_nvfp4.CONFIG["ROW1"], name, [{"PHILOX_WIDE": w} for w in (False, True, False)])
          for name in ("nvfp4/1x16_sr@amax_given", "nvfp4/row_exp_sr@amax_given")],
        (quant_nvfp4.CONFIG["ROW1"], "nvfp4/1x16_sr@amax_given", [
            c | {"RNE_CODES": {}, "SR_CODES": {}, "PHILOX_WIDE": True} for c in cfgs(
                ("BR", "NB", "num_warps", "PROGS_PER_SM"), [
                    (2, 32, 1, 24), (2, 32, 1, 21), (2, 32, 1, 20), (4, 16, 1, 20),
                    (2, 32, 1, 24)])]),
        # session 41 (offline): the reg pass's column view with Philox's products as wide
        # multiplies at REG_COL's tile (SASS, Triton 3.6: codes 1448 -> 1408 instructions,
        # expanded 1560 -> 1512, registers level). Timed in session 42, call 1 (µs, off / on
        # / off): RHT+SR column view 100.7 / 100.0 / 100.8, SR dy pair 232.0 / 231.5 /
        # 232.5; on since
        *[(quant_nvfp4.CONFIG["REG_COL"], name, [{"PHILOX_WIDE": w} for w in (False, True, False)])
          for name in ("nvfp4/col_rht_sr@amax_given", "nvfp4/rowcol_dy")],
        # (session 42, call 2, at 74bb6c2: a PIPES mask moving the row kernel's integer work
        # from the ALU pipe to the FMA pipe's multiply-adds, the shifts as mul.hi.u32, the
        # sign and the packing as multiply-adds, SR's bytes placed in one op. Offline SASS:
        # SR codes 850 -> 681 ALU-pipe instructions a tile, registers 94 -> 80. Timed, 8192²:
        # RNE codes 59.8 -> 62.5 (shift), 63.8 (shift and sign), 58.8 (packing alone: inside
        # the default's 58.4-59.9 spread); SR codes 75.7 -> 82.6 (shift), 76.2 (bytes), 76.9
        # (packing), 81.9 (all); the kernel is not ALU-pipe bound, so it was dropped.)
        # session 42 (Nsight Compute, call 4): the row kernel's codes are issue-bound (0.71 /
        # 0.77 warps issued a scheduler-cycle for SR / RNE) and register-limited (94 / 78
        # registers: 5 / 6 warps a scheduler). One block a thread holds one Philox state
        # (offline: 64 registers, 8 warps a scheduler) for ~3% more instructions an element
        # (PREFETCH as the default: the key --sweep-with selects these by). Call 5 (µs
        # graph-replayed, 8192² / 16384x4096): SR [2, 32] / 24 75.3-75.7 / 75.6-75.9 against
        # [1, 32] / 32 78.4 / 78.7, [2, 16] / 32 80.2 / 80.1, [4, 8] / 32 80.0 / 80.2, [1, 32] /
        # 28 79.2 / 79.3; RNE [2, 32] / 24 59.0-59.3 / 59.1-59.6 against [1, 32] / 32 64.4 /
        # 64.7, [2, 16] / 32 64.5 / 64.4. More warps did not raise the issue rate enough to
        # pay for the per-block work; the defaults stay.
        *[(quant_nvfp4.CONFIG["ROW1"], name, [{"PREFETCH": True,
                                               key: {"BR": br, "NB": nb, "PROGS_PER_SM": pps}}
                                              for br, nb, pps in tiles])
          for name, key, tiles in (
              ("nvfp4/1x16_sr@amax_given", "SR_CODES",
               ((2, 32, 24), (1, 32, 32), (2, 16, 32), (4, 8, 32), (1, 32, 28), (2, 32, 24))),
              ("nvfp4/1x16@amax_given", "RNE_CODES",
               ((2, 32, 24), (1, 32, 32), (2, 16, 32), (2, 32, 24))))],
        # session 59 (prepared, not yet run): the SR codes' random bytes placed by one byte
        # permute (ROW1's SR_PRMT; offline 1672 -> 1608 static instructions at the [2, 32]
        # tile, 80 registers). --sweep-with SR_PRMT
        (quant_nvfp4.CONFIG["ROW1"], "nvfp4/1x16_sr@amax_given",
         [{"SR_PRMT": on} for on in (False, True, False, True)]),
        # session 59: the reg pass's bf16 RHT column views clamped on the raw words, rounded
        # and maximized on pairs (offline, Triton 3.6: RNE codes 167 -> 128 registers, so 8
        # two-warp programs fit an SM where 6 did; the RHT+SR view 96 -> 80, 6 four-warp
        # programs where 5 did). Keys in this order: --sweep-with PROGS_PER_SM+maxnreg+PREFETCH
        *[(quant_nvfp4.CONFIG["REG_COL"]["RNE"], name, [
            {"PROGS_PER_SM": pps, "maxnreg": None, "PREFETCH": True} for pps in (6, 7, 8, 6)])
          for name in ("nvfp4/col_rht@amax_given", "nvfp4/col_relu2_exp@amax_given")],
        *[(quant_nvfp4.CONFIG["REG_COL"], name, [
            {"PROGS_PER_SM": pps, "maxnreg": None, "PREFETCH": True} for pps in (5, 6, 5)])
          for name in ("nvfp4/col_rht_sr@amax_given", "nvfp4/col_rht_sr_exp@amax_given")],
        # session 58: the RHT'd row codes at 72 registers (offline, Triton 3.6; 80 before the
        # bf16-pair clamp, rounding and maxima): 28 one-warp programs fit an SM, 32 at 64
        *[(quant_nvfp4.CONFIG["ROW1"], "nvfp4/1x16_rht@amax_given", [
            {"RHT_CODES": {"BR": br, "NB": nb, "PROGS_PER_SM": pps, **extra}}
            for br, nb, pps, extra in ((2, 32, 24, {}), (2, 32, 28, {}), (2, 32, 26, {}),
                                       (1, 64, 28, {}), (2, 32, 32, {"maxnreg": 64}),
                                       (4, 32, 14, {"num_warps": 2}), (2, 32, 24, {}))])],
        # session 58, call 5: the same cap for the RNE and SR codes (80 registers: 25 one-warp
        # programs fit where 24 run; offline, capped, they spill a little: RNE 8 / 32 bytes
        # at 72 / 64 registers, SR 16 / 56). µs, 8192² / 16384x4096: RNE 55.3-55.8 / 55.7-55.9
        # uncapped, 56.7 / 56.5 at 72 and 28 programs, 63.5 / 63.7 at 64 and 32; SR 74.6-74.9
        # / 74.9-75.2, 76.1 / 75.9, 85.0 / 84.8. The spills cost more than the warps gain.
        *[(quant_nvfp4.CONFIG["ROW1"], name, [
            {key: {"BR": 2, "NB": 32, "PROGS_PER_SM": pps}, "maxnreg": cap}
            for pps, cap in ((24, None), (28, 72), (32, 64), (24, None))])
          for name, key in (("nvfp4/1x16_sr@amax_given", "SR_CODES"),
                            ("nvfp4/1x16@amax_given", "RNE_CODES"))],
        # (session 42, call 3, at f78d286: the MXFP8 pair kernel with each program's next
        # tile loaded first as raw int32 words, PREFETCH_reg; 128 -> 167 registers. µs
        # graph-replayed, default -> prefetch at 6 / 5 / 4 programs an SM: x pair at
        # 16384x3072 95.7-96.4 -> 100.6 / 105.0 / 99.7, dy pair 114.0-115.0 -> 117.7 / 121.9 /
        # 118.7; at 16384x768 x 31.3-31.4 -> 30.5, dy 33.8-34.1 -> 33.2; 125m mxfp8 0.840x /
        # 0.839x of bf16 -> 0.831x (5 programs: 0.820x). Dropped.)
        # session 52 (Nsight Compute, call 1, a 1b MLP as training runs it): the recomputed
        # relu²(u) column view at REG_COL["RNE"]'s tile ran 216.8 µs with 168 registers, 4
        # programs of 2 warps an SM where 6 fit (2 warps a scheduler, 3.28 cycles between a
        # warp's instructions: latency-bound); du's RHT+SR column view 210.1 µs at 96
        # registers, 5 programs of 4 warps (issue-bound: 0.72 instructions a scheduler-cycle)
        (quant_nvfp4.CONFIG["REG_COL"]["RNE"], "nvfp4/col_relu2_exp@amax_given", cfgs(
            ("NI", "BC", "num_warps", "PROGS_PER_SM", "PREFETCH"), [
                (8, 32, 2, 4, True), (8, 32, 2, 5, True), (8, 32, 2, 6, True),
                (8, 32, 2, 8, False), (8, 32, 2, 6, False), (16, 16, 4, 4, True),
                (16, 16, 4, 6, False), (16, 32, 4, 3, True), (8, 32, 2, 4, True)])),
        # Call 2 (µs graph-replayed, 16384x8192 / 16384x3072, every config bit-identical):
        # relu² view 227.5 / 95.5 at the default, 201.8 / 82.6 at 6 programs, 201.5 / 80.3
        # at 8 without PREFETCH; du's view 215.0 / 86.3 at the default, 203.8 / 82.2 at
        # [256, 32] with 3 programs (166 registers offline: 3 fit). Call 3: around those,
        # and 16384x2048 (the dy views of q/k/v, o and down)
        (quant_nvfp4.CONFIG["REG_COL"], "nvfp4/col_rht_sr_exp@amax_given", cfgs(
            ("NI", "BC", "num_warps", "PROGS_PER_SM", "PREFETCH"), [
                (16, 16, 4, 5, True), (16, 16, 4, 7, False), (8, 16, 2, 10, True),
                (8, 32, 2, 5, True), (16, 32, 4, 3, True), (16, 32, 4, 4, False),
                (16, 32, 4, 3, False), (16, 16, 4, 5, True)])),
        # Call 3: [256, 32] with 3 programs stayed fastest (202.6 / 58.4 against 215.7 / 61.1
        # at 16384x8192 / 16384x2048), but 1b nvfp4 ran 0.8 ms a step slower with it
        # (bench_train "@nv-cols52"), so REG_COL keeps [256, 16]; REG_COL["RNE"] went to 6
        # programs (08215ee). Session 52, call 3: REG_COL["RNE"] at 6 programs for the RNE
        # column views written as codes (125m's split x pairs: 16384x768; 16384x2048): 25.2
        # -> 25.0 and 47.0 -> 45.3 µs
        (quant_nvfp4.CONFIG["REG_COL"]["RNE"], "nvfp4/col_rht@amax_given", cfgs(
            ("PROGS_PER_SM", "PREFETCH"), [(4, True), (6, True), (8, False), (4, True)])),
        # session 52, call 3: the x pair's one launch (REG; 1b's 16384x2048 x pairs, 255
        # registers and 2 programs an SM: 1 warp a scheduler, 87.6 µs in call 1's profile).
        # With its amax pass: 108.2 µs at the default, 108.0 at [128, 64] / 2 warps / 4
        # programs, 112.9-143.7 elsewhere; the default stays
        (quant_nvfp4.CONFIG["REG"], "nvfp4/rowcol_x", cfgs(
            ("NI", "BC", "num_warps", "PROGS_PER_SM", "maxnreg"), [
                (16, 64, 4, 2, None), (16, 64, 4, 3, 168), (8, 64, 2, 4, None),
                (16, 32, 4, 3, None), (16, 32, 4, 2, None), (8, 32, 2, 5, None),
                (16, 64, 4, 2, None)])),
        (quant_nvfp4.CONFIG["REG"], "nvfp4/rowcol_rht_sr@amax_given", reg_cfgs),
        (quant_nvfp4.CONFIG["REG"], "nvfp4/rowcol_rht@amax_given", reg_cfgs),
        # session 20: fewer instructions (13.8-16.8 SASS an element), so wider tiles and
        # more programs; REVERSE: the amax pass ends on the tiles the quantize pass starts on
        *[(quant_nvfp4.CONFIG["REG_AMAX"], name, cfgs(amax_keys, [
            (16, 32, 4, 3, 2, True), (16, 32, 4, 3, 2, False), (16, 32, 4, 4, 2, True),
            (16, 32, 4, 6, 2, True), (16, 64, 4, 2, 1, True), (16, 64, 4, 2, 2, True),
            (16, 64, 4, 3, 2, True), (8, 32, 2, 8, 2, True)]))
          for name in ("nvfp4/col_rht", "nvfp4/rowcol_x")],
        # session 50: the amax pass alone at training's launch (PAIRS: the RHT's last stage as
        # pair maxima; 3 programs an SM were chosen on an H100 at 152+ registers, 128 now);
        # where it reads at an estimated ~55% of the H200's copy rate in a 1b nvfp4 step
        (quant_nvfp4.CONFIG["REG_AMAX"], "nvfp4/amax_pass", [
            {}, {"PAIRS": True}, {"PROGS_PER_SM": 4}, {"PROGS_PER_SM": 4, "maxnreg": 128},
            {"PROGS_PER_SM": 5, "maxnreg": 96}, {"NUM_STAGES": 3},
            {"num_warps": 8, "PROGS_PER_SM": 2}, {"num_warps": 8, "PROGS_PER_SM": 2, "BC": 64},
            {"NI": 8, "PROGS_PER_SM": 6}, {"NI": 8, "PROGS_PER_SM": 4, "NUM_STAGES": 3},
            {"PAIRS": True, "PROGS_PER_SM": 4}]),
        (quant_nvfp4.CONFIG, "nvfp4/rowcol_rht_sr@amax_given", rows_cfgs),
        (quant_nvfp4.CONFIG, "nvfp4/rowcol_2d@amax_given", rows_cfgs),
        (quant_nvfp4.CONFIG, "nvfp4/rowcol_rht@amax_given", rows_cfgs),
        (quant_nvfp4.CONFIG, "nvfp4/1x16@amax_given", rows_cfgs),
        (quant_nvfp4.CONFIG, "nvfp4/col_rht", cfgs(
            ("AMAX_BR", "AMAX_BC", "AMAX_WARPS", "AMAX_PROGS_PER_SM"),
            [(64, 64, 4, 4), (64, 128, 4, 4), (32, 128, 4, 8), (64, 64, 4, 8), (128, 64, 8, 2)])),
        (quant_mx.CONFIG, "mxfp8_e4m3/rowcol", cfgs(q_keys + ("PACK_COL",), [
            (32, 128, 4, 8, 2, False), (32, 128, 4, 8, 2, True), (32, 128, 4, 8, 1, True)])),
        # session 21: the register pair kernel's tile rows (BR_reg) and launch, for the pairs
        # a layer asks for (x: row view expanded; dy: both expanded)
        *[(quant_mx.CONFIG, name, cfgs(
            ("BR_reg", "num_warps_reg", "PROGS_PER_SM_reg", "NUM_STAGES_reg"), [
                # ([64, 128] with 2 warps gave other bits in call 7 and is refused)
                (128, 4, 2, 1), (64, 4, 3, 1), (64, 4, 4, 1), (64, 4, 3, 2), (32, 2, 6, 1),
                (32, 2, 8, 1), (32, 2, 4, 2), (32, 1, 8, 1),
                # session 43: the default tile with the loop software-pipelined (NUM_STAGES
                # 2: Triton 3.6 issues the next tile's loads as cp.async into shared memory;
                # offline SASS: 128 registers either way, 4 -> 12 KB of shared memory). H200,
                # call 1, µs graph-replayed, 16384x3072: x pair 97.3-98.3 -> 98.7 / 99.2 /
                # 100.1 at 6 / 5 / 8 programs (3 stages 104.0), dy 116.0-117.4 -> 117.9 / 117.5
                # / 118.2 (120.4); at 768 level; 125m mxfp8 0.822 -> 0.822x. Not the loads.
                (32, 2, 6, 2), (32, 2, 5, 2), (32, 2, 8, 2), (32, 2, 6, 3), (32, 2, 6, 1)]))
          for name in ("mxfp8/rowcol_x", "mxfp8/rowcol_dy")],
        # session 43 (offline, Triton 3.6): [32, 64] tiles (BC_reg 64) with one warp keep a
        # column block's 32 rows in the warp: x pair 12 -> 3 BAR.SYNC, 0.742 -> 0.699 warp
        # instructions an element, 128 registers (16 programs an SM fit); 2 warps: 96. Call
        # 7 (H200, µs, 16384x3072): x 97.3-97.5 -> 101.9 / 103.5 / 102.4 / 104.8 / 105.8, dy
        # 115.5-115.7 -> 121.4 / 140.4 / 118.4 / 121.0 / 118.6; at 768 level. Slower.
        *[(quant_mx.CONFIG, name, cfgs(
            ("BR_reg", "BC_reg", "num_warps_reg", "PROGS_PER_SM_reg", "NUM_STAGES_reg"), [
                (32, 128, 2, 6, 1), (32, 64, 1, 12, 1), (32, 64, 1, 16, 1), (32, 64, 1, 10, 1),
                (32, 64, 1, 12, 2), (32, 64, 2, 10, 1), (32, 128, 2, 6, 1)]))
          for name in ("mxfp8/rowcol_x", "mxfp8/rowcol_dy")],
        # session 44: taller tiles with the loop software-pipelined (what gave the FP8 pair
        # its 3 stages' gain). Offline SASS (Triton 3.6), registers / shared memory: [128,
        # 128] 8 warps 128 / 40 KB at 2 stages (170-244 at 3); [64, 128] 4 warps 128 / 20 KB
        # at 2 (168 at 3); [128, 128] 4 warps 255 and spills at 2 (keys in this order for
        # --sweep-with NUM_STAGES_reg+BR_reg+num_warps_reg+PROGS_PER_SM_reg)
        *[(quant_mx.CONFIG, name, cfgs(
            ("NUM_STAGES_reg", "BR_reg", "num_warps_reg", "PROGS_PER_SM_reg"), [
                (1, 32, 2, 6), (2, 128, 8, 2), (1, 128, 8, 2), (3, 128, 8, 1), (2, 64, 4, 4),
                (2, 64, 4, 3), (3, 64, 4, 2), (1, 64, 4, 4), (1, 32, 2, 6)]))
          for name in ("mxfp8/rowcol_x", "mxfp8/rowcol_dy")],
        (quant_mx.CONFIG, "mxfp8_e4m3/rowcol", cfgs(
            ("ROWCOL", "num_warps_reg", "PROGS_PER_SM_reg", "NUM_STAGES_reg", "NAN_SEL"), [
                ("reg", 8, 1, 2, True), ("reg", 8, 1, 2, False), ("reg", 8, 1, 1, False),
                ("reg", 8, 2, 1, False), ("reg", 16, 1, 1, False), ("reg", 4, 2, 1, False)])),
        (quant_mx.CONFIG, "mxfp4/1x32", cfgs(q_keys, [
            (32, 128, 4, 8, 2), (64, 64, 4, 8, 2), (64, 128, 8, 4, 2)])),
        *[(quant_mx.CONFIG, f"mxfp4/rowcol_{v}", cfgs(q_keys, [
            (32, 128, 4, 8, 2), (32, 64, 4, 8, 2), (64, 64, 4, 8, 2), (32, 128, 8, 4, 2),
            (64, 128, 8, 4, 2), (32, 128, 4, 4, 1)])) for v in ("x", "dy")],
        # session 21: the 128x128 weight pair (fp32 master, W and Wᵀ), 128 fp32 values a
        # thread at 4 warps
        (quant_fp8.CONFIG, "fp8_block/128x128_rowcol_fp32", cfgs(
            ("num_warps_rowcol", "PROGS_PER_SM_rowcol"),
            [(4, 4), (8, 2), (8, 3), (8, 4), (4, 2), (16, 1), (16, 2)])),
        # session 22: the pair from the register pair kernel with one scale a tile (W128
        # "reg", 4 rows a thread, Wᵀ joined into words in-thread) against the tile kernel
        (quant_fp8.CONFIG, "fp8_block/128x128_rowcol_fp32", cfgs(
            ("W128", "num_warps_w128", "PROGS_PER_SM_w128", "NUM_STAGES_reg"),
            [("reg", 4, 2, 1), ("reg", 4, 1, 1), ("reg", 4, 3, 1), ("reg", 4, 2, 2),
             ("reg", 8, 1, 1), ("reg", 8, 2, 1), ("tile", 4, 2, 1)])),
        (quant_fp8.CONFIG, "fp8_block/1x128", cfgs(("BR_1x128", "num_warps", "PROGS_PER_SM"), [
            (32, 4, 8), (32, 8, 8), (16, 4, 16)])),
        (quant_fp8.CONFIG, "fp8_block/1x128_rowcol", cfgs(
            ("ROWCOL", "SUB_ROWS", "num_warps_sub", "PROGS_PER_SM_sub", "PACK_COL",
             "NUM_STAGES_sub"), [
                # session 5's best (the default until session 6) and the unpacked stores
                ("sub", 64, 4, 8, True, 1), ("sub", 64, 8, 4, False, 2)])),
        (quant_fp8.CONFIG, "fp8_block/1x128_rowcol", cfgs(
            ("ROWCOL", "num_warps_reg", "PROGS_PER_SM_reg", "NUM_STAGES_reg", "NAN_SEL"), [
                # session 6: the register-resident kernel (quant_rowcol_reg)
                ("reg", 8, 1, 2, True), ("reg", 8, 1, 2, False), ("reg", 8, 1, 1, False),
                ("reg", 8, 2, 1, False), ("reg", 8, 1, 3, False), ("reg", 16, 1, 1, False),
                ("reg", 16, 1, 2, False), ("reg", 4, 2, 1, False), ("reg", 4, 2, 2, False),
                ("reg", 8, 4, 1, False),
                # session 43 (H200, call 1, graph-replayed µs, 16384x3072 / 16384x768): 4
                # warps, 2 programs, 1 stage 81.95 / 26.91, 2 stages 72.61 / 26.85; 8 warps, 1
                # program, 3 stages 77.38 / 27.17
                ("reg", 4, 2, 3, False), ("reg", 4, 2, 1, False)])),
    ]
    rows = []
    for cfg, name, options in plans:
        if only and not name.startswith(tuple(only.split(","))):
            continue
        if with_key and not any(_keys_match(with_key, opt) for opt in options):
            continue
        if name.startswith("nvfp4") and (cfg is quant_nvfp4.CONFIG) != (
                quant_nvfp4.CONFIG["PASS"] != "reg"):
            continue                   # the knobs of the pass that is not running
        default = dict(cfg)
        want = VARIANTS[name][0](x, "triton")          # every config gives these bits
        for opt in options:
            cfg.update(opt)
            try:
                r = run_variant(name, x, "triton", copy_gbs, graph=True)
                r["exact"] = _same(VARIANTS[name][0](x, "triton"), want)
            except Exception as err:  # a config that fails to compile is a data point too
                r = {"variant": name, "us": None, "error": f"{type(err).__name__}: {err}"[:80]}
            r["config"] = ",".join(f"{k}={v}" for k, v in opt.items())
            rows.append(r)
        cfg.clear()
        cfg.update(default)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--sweep-shapes", default="8192x8192", help="shapes of the tile sweep")
    ap.add_argument("--sweep-only", default="", help="variant prefixes for the tile sweep")
    ap.add_argument("--sweep-with", default="",
                    help="only the sweep plans whose configs set this key (e.g. NAN_TILE), "
                         "or exactly these keys in this order (A+B+...)")
    ap.add_argument("--only", default="", help="comma-separated variant name prefixes")
    ap.add_argument("--shapes", default=None, help="e.g. 16384x768,8192x8192 (default: SHAPES)")
    ap.add_argument("--passes", default=None,
                    help="NVFP4 quantize passes to compare, e.g. v3,rows,reg,reg-sr,split "
                         "(quant_nvfp4.CONFIG['PASS']; reg-sr: REG['ROW_SR'] on; split: "
                         "PASS reg with SPLIT on)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_quant needs a CUDA device")
    dev = torch.device("cuda")
    print(common.env_header())
    copy_gbs = common.copy_bandwidth_gbs(dev)
    print(f"# device copy rate (read + written): {copy_gbs:.0f} GB/s")
    names = [n for n in VARIANTS if not args.only or n.startswith(tuple(args.only.split(",")))]
    results, cols = [], ["variant", "pass", "us", "GB/s", "%copy", "%copy@1read", "us_graph",
                         "%copy_graph", "%copy@1read_graph"]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] \
        if args.shapes else ([(8192, 8192)] if args.quick else SHAPES)
    from microscale.kernels import quant_nvfp4
    # "reg-sr": the reg pass taking stochastically rounded row views too (REG['ROW_SR'])
    passes = args.passes.split(",") if args.passes else [quant_nvfp4.CONFIG["PASS"]]
    row_sr_default = quant_nvfp4.CONFIG["REG"]["ROW_SR"]
    split_default = quant_nvfp4.CONFIG["SPLIT"]
    split_min_default = quant_nvfp4.CONFIG["SPLIT_MIN_COLS"]
    for shape in shapes:
        x = torch.randn(shape, device=dev, dtype=torch.bfloat16)
        rows = []
        for pass_ in passes:
            quant_nvfp4.CONFIG["PASS"] = "reg" if pass_ == "split" else pass_.split("-")[0]
            quant_nvfp4.CONFIG["SPLIT"] = pass_ == "split" or (
                pass_ == "reg" and split_default)
            quant_nvfp4.CONFIG["SPLIT_MIN_COLS"] = 0 if pass_ == "split" else split_min_default
            quant_nvfp4.CONFIG["REG"]["ROW_SR"] = pass_ == "reg-sr" or (
                pass_ == "reg" and row_sr_default)
            for n in names:
                if pass_ != passes[0] and not n.startswith("nvfp4"):
                    continue            # the other formats once, with the first pass
                rows.append(run_variant(n, x, "triton", copy_gbs) | {"pass": pass_})
        if not args.no_ref:
            rows += [run_variant(n, x, "reference", copy_gbs) for n in REFERENCE if n in names]
        print(f"\n## bf16 {shape[0]}x{shape[1]}")
        print(common.fmt_table(rows, cols), flush=True)
        results += rows
    summary = _targets(results)
    for line in summary["lines"]:
        print(line)
    payload = {"bench": "quant", "copy_gbs": copy_gbs, "results": results,
               "targets": summary["checks"]}
    if args.sweep:
        payload["sweep"] = []
        for shape in [tuple(int(v) for v in s.split("x")) for s in args.sweep_shapes.split(",")]:
            x = torch.randn(shape, device=dev, dtype=torch.bfloat16)
            srows = [r | {"shape": shape}
                     for r in sweep(x, copy_gbs, args.sweep_only, args.sweep_with)]
            print(f"\n## tile sweep, bf16 {shape[0]}x{shape[1]}")
            print(common.fmt_table(srows, ["variant", "config", "us", "us_graph",
                                           "%copy@1read_graph", "exact", "error"]), flush=True)
            payload["sweep"] += srows
    common.json_line(payload)


# issue 12's targets: % of the copy rate counting x read once plus every output written
# (``%copy@1read``), at 8192² and 16384x4096; "@amax_given" rows time the quantize pass alone,
# as when the producing op delivers the amax (the plain rows include the amax pass's read)
TARGETS_1READ = {"nvfp4/1x16": 70, "nvfp4/col_rht": 60, "nvfp4/1x16_rht": 60,
                 "nvfp4/1x16_sr": 60, "nvfp4/rowcol_rne_rhtsr": 50}
TARGET_SHAPES = ((8192, 8192), (16384, 4096))


def _targets(results: list[dict]) -> dict:
    by = {(r["variant"], r["shape"]): r for r in results}   # with several passes: the last
    lines, checks = ["", "## targets (issue 12, % of copy counting x once)"], {}
    for (name, shape), r in by.items():
        base = name.split("@")[0]
        if base in TARGETS_1READ and shape in TARGET_SHAPES:
            want = TARGETS_1READ[base]           # graph-replayed where timed so (no host)
            got = r.get("%copy@1read_graph") or r["%copy@1read"]
            checks[f"{name}@{shape}>={want}%copy@1read"] = got >= want
            lines.append(f"{name} {shape}: {got:.0f}% of copy counting x once (target {want}%; "
                         f"{r['%copy']:.0f}% of bytes moved) -> {'ok' if got >= want else 'MISS'}")
        if base == "nvfp4/1x16_sr" and (name.replace("_sr", ""), shape) in by:
            rne = by[(name.replace("_sr", ""), shape)]
            ratio = (r["us_graph"] / rne["us_graph"] if r.get("us_graph") and rne.get("us_graph")
                     else r["us"] / rne["us"])
            checks[f"{name}@{shape}<=1.15xRNE"] = ratio <= 1.15
            lines.append(f"{name} {shape}: {ratio:.2f}x the RNE time (target 1.15x) -> "
                         f"{'ok' if ratio <= 1.15 else 'MISS'}")
    return {"lines": lines, "checks": checks}


if __name__ == "__main__":
    main()
