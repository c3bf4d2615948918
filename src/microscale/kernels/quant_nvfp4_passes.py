"""Which NVFP4 pass quantizes a call's views (``quant_nvfp4``'s host side), and why.

Every pass writes the same bits; they differ in what they take and how fast they run:

* ``reg`` (the default, ``CONFIG['PASS']``) refuses 2D (16x16) scales, a row view with the RHT
  (unless alone, on the row kernel), a stochastically rounded row view beside a column view (unless
  ``REG['ROW_SR']``) and, for inputs at most ``EXP_COL_ROWS_MAX_COLS`` wide, a pair whose column
  view is asked for expanded; the ``rows`` pass takes what it refuses (:func:`_reg_refusal`). A
  column view alone asked for expanded (``nn.recompute``'s xᵀ) is written so by the reg pass,
  as a split pair's first launch writes it.
* ``split``: a pair as two launches, the column view on the reg pass, then the row view alone
  (:func:`_splits` says when: the SR dy pairs, expanded column views, x pairs at most
  ``SPLIT_X_MAX_COLS`` wide).
* A bf16/fp16 row view alone runs the row kernel (``quant_nvfp4_row``, ``CONFIG['ROW1']``),
  :func:`row_kernel_takes`.

:func:`choose_pass` records the choice for ``ms.explain()`` (``backend.note_path``), so a
slower pass is never taken silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..backend import note_path, rowcol_key
from .quant_nvfp4_config import CONFIG

if TYPE_CHECKING:
    from .quant_nvfp4 import _View

__all__ = ["choose_pass", "row_exp_code", "row_kernel_takes"]

_PASSES = ("reg", "rows", "v3")


def row_exp_code(expanded: bool) -> int:
    """The reg kernels' ``ROW_EXP`` for a row view (dense and grouped): 0 codes, 1 expanded (NaN
    kept in the block maxima), 2 expanded with the per-element NaN select (``CONFIG
    ["EXP_NAN_MAX"]`` off)."""
    if not expanded:
        return 0
    return 1 if CONFIG["EXP_NAN_MAX"] else 2


def _reg_refusal(row: _View | None, col: _View | None, expand=(False, False)) -> str | None:
    """Why the "reg" pass cannot take these views (None: it can)."""
    if row is not None and col is not None and expand[1] \
            and col.shape[0] <= CONFIG["EXP_COL_ROWS_MAX_COLS"] \
            and not CONFIG["REG"].get("COL_EXP", False):
        return (f"a column view asked for expanded of an input at most "
                f"{CONFIG['EXP_COL_ROWS_MAX_COLS']} wide (EXP_COL_ROWS_MAX_COLS: the rows pass "
                f"writes it)")
    if row is not None and row.rht and not (col is None and row_kernel_takes(row, expand[0])):
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


def choose_pass(row: _View | None, col: _View | None, op: str, expand=(False, False),
                 prologue: str = "", col_amax: bool = False) -> str:
    """The pass that runs ("reg", "split", "rows" or "v3"), recorded for ``ms.explain()``
    (with ``prologue``, the op the reg pass applies as it loads; the others are given its
    result; ``col_amax``: a column view's amax measured by the amax pass, no view written)."""
    want = CONFIG["PASS"]
    if want not in _PASSES:
        raise ValueError(f"quant_nvfp4.CONFIG['PASS'] (MICROSCALE_NVFP4_PASS) must be one of "
                         f"{_PASSES}, got {want!r}")
    key = rowcol_key(row and "nvfp4", col and "nvfp4") if op == "quantize_rowcol" else "nvfp4"
    why = _reg_refusal(row, col, expand) if want == "reg" else None
    fused = (f"; {prologue} fused into its loads" if prologue else "") \
        + ("; the column view's amax alone measured beside it" if col_amax else "")
    if want == "reg" and _splits(row, col, expand):
        second = "the row kernel" if row_kernel_takes(row, expand[0]) else "a reg-pass launch"
        note_path(op, key, "triton (NVFP4 pair split: two launches, the column view (reg pass), "
                  f"then the row view alone ({second})" + fused + ")")
        return "split"
    if want == "reg" and why is None:
        if col is None and row_kernel_takes(row, expand[0]):
            rht = ", rotated there (RHT)" if row.rht else ""
            note_path(op, key, "triton (NVFP4 row kernel: a 16-element block in one thread"
                      + rht + fused + ")")
        else:
            note_path(op, key, "triton (NVFP4 reg pass: 16-row blocks in registers" + fused
                      + ")")
        return "reg"
    if why is not None:
        note_path(op, key, f"triton (NVFP4 rows pass; the reg pass does not take {why})")
        return "rows"
    note_path(op, key, f"triton (NVFP4 {want} pass, PASS={want!r})")
    return want


def row_kernel_takes(row: _View, expanded: bool) -> bool:
    """Whether a row view alone runs :mod:`.quant_nvfp4_row` (``CONFIG['ROW1']``, per output
    form: ``codes`` or ``expanded``): 1x16 blocks of a bf16/fp16 input; with the RHT
    (``CONFIG['ROW1']['rht']``) only written as codes, rounded to nearest or from the
    caller's bytes (fp32 input, 2D blocks, and the RHT with in-kernel Philox or written
    expanded keep their passes)."""
    if not (CONFIG["ROW1"]["expanded" if expanded else "codes"]
            and row.dtype in (torch.bfloat16, torch.float16) and not row.block_2d):
        return False
    return not row.rht or (CONFIG["ROW1"].get("rht", False) and not expanded
                           and row.sr_mode != 2)
