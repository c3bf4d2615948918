"""What a quantization kernel compiles to on sm_90, with no GPU: registers, shared memory, SASS.

    python benchmarks/sass_offline.py                      # every preset below
    python benchmarks/sass_offline.py fp8_reg fp8_sub      # some of them
    python benchmarks/sass_offline.py mx_reg --sass out/   # also write the SASS listings

Compiles with ``triton.compile(..., target=GPUTarget("cuda", 90, 32))`` (the Triton installed
here: use the GPU machine's version, 3.6, for figures that should match it; ptxas and cuobjdump
come with Triton's wheel) and prints, per kernel, registers per thread, dynamic shared memory,
the static SASS instruction count and that count per element of a tile (static: slow paths
such as a division's fallback are counted once, never-taken or not; loops over tiles run the
body once per tile, so per element is per tile element). The opcode histogram shows where the
instructions go (``FMNMX``: maxima and clamps, ``SEL``/``P2R``: NaN masks, ``SHFL``: lane
reductions, ``STS``/``LDS``: layout conversions through shared memory). Not run in CI.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)          # compile for the GPU, native casts on
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from microscale.kernels import (gemm_alpha, gemm_mxfp8, gemm_mxfp8_wgmma, quant_fp8,  # noqa: E402
                                quant_mx,
                                quant_nvfp4, quant_nvfp4_grouped_reg, quant_nvfp4_reg,
                                quant_nvfp4_row,
                                quant_nvfp4_v3, quant_rowcol_reg)

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
ROWCOL = {"x_ptr": "*bf16", "amax_ptr": "*fp32", "qr_ptr": "*u8", "sr_ptr": "*fp32",
          "qc_ptr": "*u8", "sc_ptr": "*fp32", "rows": "i32", "cols": "i32", "n_tc": "i32",
          "n_tiles": "i32"}
MX_ROWCOL = ROWCOL | {"sr_ptr": "*u8", "sc_ptr": "*u8"}
# the 1x128 scales column-major (op_specs.scale_col_major): strides (1, rows) and (1, cols)
FP8_REG = ROWCOL | {"sr_s0": "i32", "sr_s1": "i32", "sc_s0": "i32", "sc_s1": "i32",
                    "y_ptr": "*bf16"}
MX_OLD = {"x_ptr": "*bf16", "amax_ptr": "*fp32", "seed_ptr": "*bf16", "rows": "i32",
          "cols": "i32", "n_tc": "i32", "n_tiles": "i32", "mr_ptr": "*bf16", "br_ptr": "*bf16",
          "qr_ptr": "*u8", "sr_ptr": "*u8", "mc_ptr": "*bf16", "bc_ptr": "*bf16", "qc_ptr": "*u8",
          "sc_ptr": "*u8"}
ALIGNED = ("x_ptr", "qr_ptr", "qc_ptr", "sr_ptr", "sc_ptr", "rows", "cols")
_MX_OLD_CONSTS = dict(IN_DTYPE=1, BR=32, BC=128, ROW=True, ROW_ELEM=0, ROW_CEIL=True,
                      ROW_RHT_D=0, ROW_SR=0, COL=True, COL_ELEM=0, COL_CEIL=True, COL_RHT_D=0,
                      COL_SR=0, NUM_STAGES=2, PACK_COL=False)
NV_REG = {"x_ptr": "*bf16", "amax_ptr": "*fp32", "seed_ptr": "*i32", "qr_ptr": "*i32",
          "sr_ptr": "*u8", "br_ptr": "*u8", "qc_ptr": "*i32", "sc_ptr": "*u8", "bc_ptr": "*u8",
          "rows": "i32", "cols": "i32", "n_tc": "i32", "n_tiles": "i32"}
NV_ROWS = NV_REG | {"m_ptr": "*fp32", "qr_ptr": "*u8", "qc_ptr": "*u8"}
NV_ROW1 = {"x_ptr": "*bf16", "amax_ptr": "*fp32", "seed_ptr": "*i32", "q_ptr": "*i32",
           "s_ptr": "*u8", "b_ptr": "*u8", "rows": "i32", "cols": "i32", "n_tc": "i32",
           "n_tiles": "i32"}
_NV_ROW1 = dict(IN_DTYPE=1, BR=16, NB=16, SR=0, EXP=0, EVEN=True, NUM_STAGES=2)
_NV_ROW1_NOW = dict(IN_DTYPE=1, BR=8, NB=16, SR=0, EXP=0, EVEN=True, NUM_STAGES=1,
                    NAN_TILE=True, STORE64=True)
_PARTS = {"n_part": "i32", "ar_ptr": "*fp32", "ac_ptr": "*fp32"}
NV_AMAX = {"x_ptr": "*bf16", "amax_ptr": "*fp32", "m_ptr": "*fp32", "rows": "i32", "cols": "i32",
           "n_tc": "i32", "n_tiles": "i32"}
_NV_REG = dict(IN_DTYPE=1, NI=16, BC=64, EVEN=True, ROW=True, ROW_SR=0, COL=True, COL_RHT=True,
               COL_SR=0, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=1)
_NV_ROWS = dict(IN_DTYPE=1, BR=32, BC=32, ROW=True, ROW_RHT=False, ROW_2D=False, ROW_SR=0,
                COL=True, COL_RHT=True, COL_2D=False, COL_SR=0, NUM_STAGES=2)
NV_GRP = {"x_ptr": "*bf16", "tab_ptr": "*i32", "amax_r_ptr": "*fp32", "amax_c_ptr": "*fp32",
          "seed_r_ptr": "*i64", "seed_c_ptr": "*i64", "qr_ptr": "*i32", "sr_ptr": "*u8", "br_ptr": "*u8", "qc_ptr": "*i32", "sc_ptr": "*u8",
          "bc_ptr": "*u8", "tokens": "i32", "bound": "i32", "cols": "i32", "n_seg": "i32",
          "n_tc": "i32", "n_tiles": "i32"}
_NV_GRP = dict(IN_DTYPE=1, NI=16, BC=64, ROW=True, ROW_SR=0, COL=True, COL_RHT=True, COL_SR=0,
               SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=1)
# NVFP4's α GEMM (TMA kernel, SMALL_TILE's halves; "smem KB" is the number to watch: the
# H100 gives a block 227 KB) plain and with the relu² backward's epilogue op (session 27)
ALPHA = {"a_desc": "tensordesc<bf16[128,64]>", "b_desc": "tensordesc<bf16[256,64]>",
         "y_desc": "tensordesc<bf16[128,128]>", "f_ptr": "*fp32", "fb_ptr": "*fp32",
         "M": "i32", "N": "i32", "K": "i32", "e_desc": "tensordesc<bf16[128,128]>"}
MX8_GEMM = {"a_ptr": "*fp8e4nv", "sa_ptr": "*i32", "b_ptr": "*fp8e4nv", "sb_ptr": "*i32",
            "y_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32", "KS": "i32", "stride_am": "i32",
            "stride_sam": "i32", "stride_bn": "i32", "stride_sbn": "i32", "stride_ym": "i32",
            "__aligned__": ("a_ptr", "sa_ptr", "b_ptr", "sb_ptr", "y_ptr", "M", "N", "K", "KS",
                            "stride_am", "stride_sam", "stride_bn", "stride_sbn", "stride_ym")}
_GL = gemm_mxfp8_wgmma.gl if gemm_mxfp8_wgmma.HAVE_GLUON else None
MX8_WGMMA = {} if _GL is None else {
    "a_desc": f"tensordesc<fp8e4nv[128, 128],"
              f"{_GL.NVMMASharedLayout.get_default_for([128, 128], _GL.float8e4nv)!r}>",
    "sa_desc": f"tensordesc<fp32[4, 128],"
               f"{_GL.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)!r}>",
    "ua_ptr": "*i32", "ub_ptr": "*i32", "y_ptr": "*bf16", "M": "i32", "N": "i32",
    "NSTEP": "i32", "stride_ym": "i32", "__aligned__": ("y_ptr", "stride_ym")}
MX8_WGMMA |= {"b_desc": MX8_WGMMA.get("a_desc"), "sb_desc": MX8_WGMMA.get("sa_desc")}
# (the Gluon MXFP8 GEMM, session 30: loader warp + two consumer warpgroups; its registers are
# per partition (setmaxnreg), so "regs" is the launch's, and spills are what to watch; its
# preset is added after PRESETS where this Triton has Gluon)
_MX8_GEMM = dict(A_E5M2=False, B_E5M2=False, BM=64, BN=128, CH=4, GROUP_M=8, DOT_F32=False,
                 TMA=False)
_ALPHA = dict(BM=128, BN=256, BK=64, GROUP_M=8, FROM_AMAX=True, SUBTILE=True, OUT_DTYPE=1)
# name -> (kernel, signature, constexprs, num_warps, num_stages, elements per tile)
PRESETS = {
    "fp8_reg": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=True, NUM_STAGES=1), 4, 1,
                128 * 128),
    "fp8_reg_nansel": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                       dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=True, WRITE_ROW=True, NUM_STAGES=1), 4, 1,
                       128 * 128),
    # a 1x128 column view alone (nn.recompute's xᵀ), plain and with relu²'s square fused in
    "fp8_col": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=False,
                     NUM_STAGES=1), 4, 1, 128 * 128),
    "fp8_col_sq": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                   dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=False,
                        PRO=1, IN_DTYPE=1, NUM_STAGES=1), 4, 1, 128 * 128),
    # nn.mlp's pairs: relu(u)² from u (forward, the view kept), the relu² backward from ds, u
    "fp8_reg_rsq": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                    dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=True,
                         PRO=3, IN_DTYPE=1, NUM_STAGES=1), 4, 1, 128 * 128),
    "fp8_reg_rsqg": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                     dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=True,
                          PRO=4, IN_DTYPE=1, NUM_STAGES=1), 4, 1, 128 * 128),
    "fp8_col_rsq": (quant_rowcol_reg.fp8_rowcol_reg_kernel, FP8_REG,
                    dict(FP8_EXP=8, IN_EXP=127, E5M2=False, NAN_SEL=False, WRITE_ROW=False,
                         PRO=3, IN_DTYPE=1, NUM_STAGES=1), 4, 1, 128 * 128),
    "fp8_sub": (quant_fp8._fp8_rowcol_sub_kernel, ROWCOL,
                dict(BC=128, SUB=64, FP8_MAX=448.0, IN_MAX=3.3895313892515355e38, POW2=True,
                     E5M2=False, NUM_STAGES=1, PACK=True), 4, 1, 128 * 128),
    "mx_reg": (quant_rowcol_reg.mx8_rowcol_reg_kernel, MX_ROWCOL,
               dict(ROW_ELEM=0, ROW_CEIL=True, COL_ELEM=0, COL_CEIL=True, NAN_SEL=False,
                    NUM_STAGES=1), 4, 1, 128 * 128),
    # its views written expanded (bf16 value · 2^k): x's row view, and dy's both
    "mx_reg_x_exp": (quant_rowcol_reg.mx8_rowcol_reg_kernel, MX_ROWCOL | {"qr_ptr": "*bf16"},
                     dict(ROW_ELEM=0, ROW_CEIL=True, COL_ELEM=0, COL_CEIL=True, NAN_SEL=False,
                          NUM_STAGES=1, ROW_EXP=True), 4, 1, 128 * 128),
    "mx_reg_dy_exp": (quant_rowcol_reg.mx8_rowcol_reg_kernel,
                      MX_ROWCOL | {"qr_ptr": "*bf16", "qc_ptr": "*bf16"},
                      dict(ROW_ELEM=0, ROW_CEIL=True, COL_ELEM=0, COL_CEIL=True, NAN_SEL=False,
                           NUM_STAGES=1, ROW_EXP=True, COL_EXP=True), 4, 1, 128 * 128),
    "mx_old": (quant_mx._mx_kernel, MX_OLD, _MX_OLD_CONSTS, 4, 2, 32 * 128),
    # NVFP4 pairs: x (row RNE, column RHT RNE) and dy (row SR, column RHT + SR, Philox)
    "nv_reg_x": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG, _NV_REG, 4, 1, 256 * 64),
    "nv_reg_dy": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                  _NV_REG | dict(ROW_SR=2, COL_SR=2), 4, 1, 256 * 64),
    "nv_reg_col_rht": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                       _NV_REG | dict(ROW=False), 4, 1, 256 * 64),
    "nv_reg_col_rht_sr": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                          _NV_REG | dict(ROW=False, COL_SR=2), 4, 1, 256 * 64),
    "nv_reg_row": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                   _NV_REG | dict(COL=False), 4, 1, 256 * 64),
    "nv_reg_row_sr": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                      _NV_REG | dict(COL=False, ROW_SR=2), 4, 1, 256 * 64),
    # session 31: a row view alone, a 16-element block a thread (quant_nvfp4_row), as the
    # training's split pairs and ms.quantize launch it (CONFIG["ROW1"]'s tile)
    "nv_row1": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1, _NV_ROW1, 4, 2, 16 * 16 * 16),
    "nv_row1_sr": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1, _NV_ROW1 | dict(SR=2), 4, 2,
                   16 * 16 * 16),
    # session 40: the row kernel at today's defaults (CONFIG["ROW1"]'s RNE_CODES, SR_CODES),
    # and with the next tile's words loaded while this one's are quantized (PREFETCH)
    "nv_row1_rne": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1, _NV_ROW1_NOW, 2, 1, 8 * 16 * 16),
    "nv_row1_rne_pf": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                       _NV_ROW1_NOW | dict(PREFETCH=True), 2, 1, 8 * 16 * 16),
    "nv_row1_sr4": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                    _NV_ROW1_NOW | dict(SR=2, BR=4, NB=8), 1, 1, 4 * 8 * 16),
    "nv_row1_sr4_pf": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                       _NV_ROW1_NOW | dict(SR=2, BR=4, NB=8, PREFETCH=True), 1, 1, 4 * 8 * 16),
    # session 41: the codes tiles of today's CONFIG["ROW1"] (one warp, [2, 32] blocks)
    "nv_row1_rne_now": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                        _NV_ROW1_NOW | dict(BR=2, NB=32, PREFETCH=True), 1, 1, 2 * 32 * 16),
    "nv_row1_sr_now": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                       _NV_ROW1_NOW | dict(SR=2, BR=2, NB=32, PREFETCH=True), 1, 1, 2 * 32 * 16),
    # ... with Philox's products as wide multiplies (PHILOX_WIDE, on since session 41)
    "nv_row1_sr_wide": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
                        _NV_ROW1_NOW | dict(SR=2, BR=2, NB=32, PREFETCH=True, PHILOX=1),
                        1, 1, 2 * 32 * 16),
    "nv_row1_exp": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1 | {"q_ptr": "*bf16"},
                    _NV_ROW1 | dict(EXP=1), 4, 2, 16 * 16 * 16),
    "nv_row1_sr_exp": (quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1 | {"q_ptr": "*bf16"},
                       _NV_ROW1 | dict(SR=2, EXP=1), 4, 2, 16 * 16 * 16),
    "nv_reg_x_masked": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                        _NV_REG | dict(EVEN=False), 4, 1, 256 * 64),
    "nv_reg_amax": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                    dict(IN_DTYPE=1, NI=16, BC=64, EVEN=True, ROW=True, COL=True, COL_RHT=True,
                         SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2), 4, 2, 256 * 64),
    "nv_reg_amax1": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                     dict(IN_DTYPE=1, NI=16, BC=64, EVEN=True, ROW=True, COL=True, COL_RHT=True,
                          SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=1), 4, 1, 256 * 64),
    "nv_reg_amax_rev": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                        dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                             COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                             REVERSE=True), 4, 2, 256 * 32),
    # session 28: the column RHT without its input clamp (AMAX_UNCLAMPED), the x pair's and
    # the column view alone's amax pass, and relu²'s backward dy pair's
    "nv_reg_amax_unc": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                        dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                             COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                             REVERSE=True, PARTIAL=True, UNCLAMPED=True), 4, 2, 256 * 32),
    "nv_reg_amax_part": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                         dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                              COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                              REVERSE=True, PARTIAL=True), 4, 2, 256 * 32),
    "nv_reg_amax_col_unc": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                            dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=False, COL=True,
                                 COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK,
                                 NUM_STAGES=2, REVERSE=True, PARTIAL=True, UNCLAMPED=True),
                            4, 2, 256 * 32),
    "nv_reg_amax_col": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                        dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=False, COL=True,
                             COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                             REVERSE=True, PARTIAL=True), 4, 2, 256 * 32),
    "nv_reg_amax_grad_unc": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX | {"y_ptr": "*bf16"},
                             dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                                  COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK,
                                  NUM_STAGES=2, REVERSE=True, PRO=4, PARTIAL=True,
                                  UNCLAMPED=True), 4, 2, 256 * 32),
    "nv_reg_amax_bc32": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                         dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                              COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2),
                         4, 2, 256 * 32),
    # the grouped (MoE) register-layout kernels: x pair, dy pair's two launches, amax pass
    "nv_grp_x": (quant_nvfp4_grouped_reg.nvfp4_grouped_reg_kernel, NV_GRP, _NV_GRP, 4, 1,
                 256 * 64),
    "nv_grp_col_sr": (quant_nvfp4_grouped_reg.nvfp4_grouped_reg_kernel, NV_GRP,
                      _NV_GRP | dict(ROW=False, COL_SR=2), 4, 1, 256 * 64),
    "nv_grp_row_sr": (quant_nvfp4_grouped_reg.nvfp4_grouped_reg_kernel, NV_GRP,
                      _NV_GRP | dict(COL=False, ROW_SR=2), 4, 1, 256 * 64),
    # session 28: the row view written expanded, NaN kept in the block maxima (ROW_EXP 1, the
    # default since EXP_NAN_MAX) and with the per-element select (2), SR as nn.grouped asks
    "nv_grp_row_sr_exp1": (quant_nvfp4_grouped_reg.nvfp4_grouped_reg_kernel,
                           NV_GRP | {"qr_ptr": "*bf16"},
                           _NV_GRP | dict(COL=False, ROW_SR=2, ROW_EXP=1), 4, 1, 256 * 64),
    "nv_grp_row_sr_exp2": (quant_nvfp4_grouped_reg.nvfp4_grouped_reg_kernel,
                           NV_GRP | {"qr_ptr": "*bf16"},
                           _NV_GRP | dict(COL=False, ROW_SR=2, ROW_EXP=2), 4, 1, 256 * 64),
    "nv_grp_amax": (quant_nvfp4_grouped_reg.nvfp4_grouped_amax_kernel,
                    {k: NV_GRP[k] for k in ("x_ptr", "tab_ptr", "amax_r_ptr", "amax_c_ptr",
                                            "bound", "cols", "n_seg", "n_tc", "n_tiles")},
                    dict(IN_DTYPE=1, NI=16, BC=32, ROW=True, COL=True, COL_RHT=True,
                         SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2), 4, 2, 256 * 32),
    # with the relu² MLP's prologues (nn.mlp): relu(u)² forward (x pair, row view expanded),
    # ds · 2 relu(u) on the up projection's dy (the split pair's launches), and the amax passes
    "nv_reg_x_exp_relu2": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qr_ptr": "*bf16"},
                           _NV_REG | dict(ROW_EXP=True, PRO=3), 4, 1, 256 * 64),
    "nv_reg_col_rht_sr_grad": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                               NV_REG | {"y_ptr": "*bf16"},
                               _NV_REG | dict(ROW=False, COL_SR=2, BC=32, PRO=4), 4, 2, 256 * 32),
    "nv_reg_col_rht_sr_bc32": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
                               _NV_REG | dict(ROW=False, COL_SR=2, BC=32), 4, 2, 256 * 32),
    "nv_reg_row_sr_exp_grad": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                               NV_REG | {"qr_ptr": "*bf16", "y_ptr": "*bf16"},
                               _NV_REG | dict(COL=False, ROW_SR=2, ROW_EXP=True, PRO=4), 4, 1,
                               256 * 64),
    "nv_reg_amax_relu2": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                          dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                               COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                               REVERSE=True, PRO=3), 4, 2, 256 * 32),
    "nv_reg_amax_grad": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX | {"y_ptr": "*bf16"},
                         dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                              COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                              REVERSE=True, PRO=4), 4, 2, 256 * 32),
    "nv_rows_x": (quant_nvfp4.nvfp4_rows_kernel, NV_ROWS, _NV_ROWS, 4, 2, 32 * 32),
    "nv_rows_dy": (quant_nvfp4.nvfp4_rows_kernel, NV_ROWS, _NV_ROWS | dict(ROW_SR=2, COL_SR=2),
                   4, 2, 32 * 32),
    # the views training consumes at once, written expanded (bf16 value · block scale)
    "nv_reg_x_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qr_ptr": "*bf16"},
                     _NV_REG | dict(ROW_EXP=True), 4, 1, 256 * 64),
    # session 25: the x pair on [256, 32] tiles (half the values a thread: no spill?)
    "nv_reg_x_exp_bc32": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qr_ptr": "*bf16"},
                          _NV_REG | dict(ROW_EXP=True, BC=32), 4, 1, 256 * 32),
    # session 26: the amax pass's per-program maxima reduced at the start (AMAX_PARTIALS)
    "nv_reg_x_exp_parts": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                           NV_REG | _PARTS | {"qr_ptr": "*bf16"},
                           _NV_REG | dict(ROW_EXP=True, NP=512), 4, 1, 256 * 64),
    "nv_reg_col_rht_parts": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | _PARTS,
                             _NV_REG | dict(ROW=False, NP=512), 4, 1, 256 * 64),
    "nv_reg_amax_parts": (quant_nvfp4_reg.nvfp4_amax_reg_kernel, NV_AMAX,
                          dict(IN_DTYPE=1, NI=16, BC=32, EVEN=True, ROW=True, COL=True,
                               COL_RHT=True, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK, NUM_STAGES=2,
                               REVERSE=True, PARTIAL=True), 4, 2, 256 * 32),
    "nv_reg_x_exp_w8": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qr_ptr": "*bf16"},
                        _NV_REG | dict(ROW_EXP=True), 8, 1, 256 * 64),
    # session 41: the column view alone at REG_COL's tile ([256, 16], the next tile loaded
    # first), with Philox's products as wide multiplies or not (codes; expanded as training's
    # SR dy pairs write it)
    **{f"nv_reg_col_rht_sr_pf16{'_exp' if exp else ''}{'_wide' if wide else ''}": (
        quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | ({"qc_ptr": "*bf16"} if exp else {}),
        _NV_REG | dict(ROW=False, COL_SR=2, COL_EXP=exp, BC=16, PREFETCH=True, FAST_E2M1=True,
                       PHILOX_WIDE=wide), 4, 1, 256 * 16)
       for exp in (False, True) for wide in (False, True)},
    # session 51: the recomputed relu²(u) column view as a 1b step launches it (REG_COL's RNE
    # tile [128, 32], 2 warps, the next tile loaded first; relu² applied as u loads; RHT;
    # written expanded): with du's (nv_reg_col_rht_sr_pf16_exp_wide) ~253 µs a launch at
    # 16384x8192, 8.6 ms of a 1b nvfp4 step (h200_20261129_session51, call 2)
    "nv_col_relu2_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qc_ptr": "*bf16"},
                         _NV_REG | dict(NI=8, BC=32, ROW=False, COL_EXP=True, PRO=3,
                                        FAST_E2M1=True, PREFETCH=True, PHILOX_WIDE=True),
                         2, 1, 128 * 32),
    # session 52: du's column view at the [256, 32] tile that ran it fastest alone (call 2:
    # 3 programs an SM asked), to see how many of its programs fit an SM (166 registers: 3)
    "nv_reg_col_rht_sr_pf32_exp_wide": (
        quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qc_ptr": "*bf16"},
        _NV_REG | dict(ROW=False, COL_SR=2, COL_EXP=True, BC=32, PREFETCH=True, FAST_E2M1=True,
                       PHILOX_WIDE=True), 4, 1, 256 * 32),
    "nv_reg_col_rht_sr_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                              NV_REG | {"qc_ptr": "*bf16"},
                              _NV_REG | dict(ROW=False, COL_SR=2, COL_EXP=True), 4, 1, 256 * 64),
    "nv_reg_row_sr_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                          NV_REG | {"qr_ptr": "*bf16"},
                          _NV_REG | dict(COL=False, ROW_SR=2, ROW_EXP=True), 4, 1, 256 * 64),
    "nv_reg_dy_nosr_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel,
                           NV_REG | {"qr_ptr": "*bf16", "qc_ptr": "*bf16"},
                           _NV_REG | dict(ROW_EXP=True, COL_EXP=True), 4, 1, 256 * 64),
    "nv_reg_col_rht_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qc_ptr": "*bf16"},
                           _NV_REG | dict(ROW=False, COL_EXP=True), 4, 1, 256 * 64),
    "nv_reg_row_exp": (quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG | {"qr_ptr": "*bf16"},
                       _NV_REG | dict(COL=False, ROW_EXP=True), 4, 1, 256 * 64),
    "nv_rows_dy_nosr_exp": (quant_nvfp4.nvfp4_rows_kernel,
                            NV_ROWS | {"qr_ptr": "*bf16", "qc_ptr": "*bf16"},
                            _NV_ROWS | dict(ROW_EXP=True, COL_EXP=True), 4, 2, 32 * 32),
    "nv_rows_dy_exp": (quant_nvfp4.nvfp4_rows_kernel,
                       NV_ROWS | {"qr_ptr": "*bf16", "qc_ptr": "*bf16"},
                       _NV_ROWS | dict(ROW_SR=2, COL_SR=2, ROW_EXP=True, COL_EXP=True), 4, 2,
                       32 * 32),
    "alpha_tma": (gemm_alpha._alpha_mm_tma_kernel, ALPHA,
                  _ALPHA | dict(NUM_STAGES=4, e_desc=None), 8, 4, 128 * 256),
    "alpha_tma_du": (gemm_alpha._alpha_mm_tma_kernel, ALPHA, _ALPHA | dict(NUM_STAGES=3, EPI=4),
                     8, 3, 128 * 256),
    # session 53: du's NVFP4 amaxes (max|du|, max|RHT(du)| down the columns) in the epilogue
    "alpha_tma_du_amax": (gemm_alpha._alpha_mm_tma_kernel, ALPHA | {"amax_ptr": "*fp32"},
                          _ALPHA | dict(NUM_STAGES=3, EPI=4, AMAX=2,
                                        SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK), 8, 3, 128 * 256),
    # and relu(u)²'s amaxes in the up projection's fprop (1b: TILE, no SUBTILE, 3 stages)
    "alpha_tma_u_amax": (gemm_alpha._alpha_mm_tma_kernel,
                         ALPHA | {"amax_ptr": "*fp32", "y_desc": "tensordesc<bf16[128,256]>"},
                         _ALPHA | dict(NUM_STAGES=3, SUBTILE=False, e_desc=None, AMAX=2,
                                       AMAX_OP=3, SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK), 8, 3,
                         128 * 256),
    "alpha_tma_u_amax_sub": (gemm_alpha._alpha_mm_tma_kernel, ALPHA | {"amax_ptr": "*fp32"},
                             _ALPHA | dict(NUM_STAGES=3, e_desc=None, AMAX=2, AMAX_OP=3,
                                           SIGNS=quant_nvfp4_reg.RHT_SIGN_MASK), 8, 3,
                             128 * 256),
    "alpha_tma_u": (gemm_alpha._alpha_mm_tma_kernel,
                    ALPHA | {"y_desc": "tensordesc<bf16[128,256]>"},
                    _ALPHA | dict(NUM_STAGES=3, SUBTILE=False, e_desc=None), 8, 3, 128 * 256),
    # the MXFP8 FP8-tensor-core GEMM's default config (64x128, K step 128, 4 warps, 4 stages),
    # every chunk flushed / adaptive; pointers, strides and K as the GPU specializes them
    "mx8_gemm": (gemm_mxfp8._mxfp8_kernel, MX8_GEMM, _MX8_GEMM | dict(ADAPTIVE=False), 4, 4,
                 64 * 128),
    "mx8_gemm_adaptive": (gemm_mxfp8._mxfp8_kernel, MX8_GEMM, _MX8_GEMM | dict(ADAPTIVE=True), 4,
                          4, 64 * 128),
    "nv_amax_old": (quant_nvfp4_v3.nvfp4_amax_kernel, NV_AMAX,
                    dict(IN_DTYPE=1, BR=64, BC=64, ROW=True, ROW_RHT=False, COL=True,
                         COL_RHT=True, NUM_STAGES=2), 4, 2, 64 * 64),
}


if gemm_mxfp8_wgmma.HAVE_GLUON:    # the module's own tile and register constants (what it launches)
    W = gemm_mxfp8_wgmma
    PRESETS["mx8_wgmma"] = (W._mxfp8_wgmma_kernel, MX8_WGMMA,
                            dict(BM=W.BM, BN=W.BN, BK=W.BK, STAGES=W.STAGES, GROUP_M=8,
                                 CONSUMER_REGS=W.CONSUMER_REGS), 4, 1, 64 * 128)


def compile_sm90(fn, sig: dict, consts: dict, num_warps: int, num_stages: int):
    # constexprs a preset leaves out take the kernel's default (e.g. ROW_EXP, WRITE_ROW)
    # (and so do the other defaulted arguments a preset does not give, e.g. y_ptr=None, seg=0)
    consts = {p.name: p.default for p in fn.params
              if p.name not in consts and p.has_default
              and (p.is_constexpr or p.name not in sig)} | consts
    signature = {n: "constexpr" if n in consts else sig[n] for n in fn.arg_names}
    aligned = (*ALIGNED, *sig.get("__aligned__", ()))      # a preset may add its own names
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned if n in sig}
    if getattr(fn, "is_gluon", lambda: False)():          # a Gluon kernel (its own AST source)
        from triton.experimental.gluon._runtime import GluonASTSource
        src = GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    else:
        src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def inspect(kernel) -> tuple[dict, collections.Counter, str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(kernel.asm["cubin"])
        sass = subprocess.run([str(BIN / "cuobjdump"), "-sass", str(path)], check=True,
                              capture_output=True, text=True).stdout
        res = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", str(path)], check=True,
                             capture_output=True, text=True).stdout
    ops = collections.Counter(
        m.group(1) for m in re.finditer(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)",
                                        sass, re.M))
    usage = {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED):(\d+)", res)}
    return usage, ops, sass


# session 42: SR codes with one block a thread (Philox's registers for one block, so more
# programs fit), PREFETCH and PHILOX_WIDE as today
for _br, _nb in ((1, 32), (4, 8)):
    PRESETS[f"nv_row1_sr1_{_br}x{_nb}"] = (
        quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
        _NV_ROW1_NOW | dict(SR=2, BR=_br, NB=_nb, PREFETCH=True, PHILOX=1), 1, 1,
        _br * _nb * 16)


# session 57: training's expanded row views (quant_nvfp4.CONFIG["ROW1"]: [4, 8] blocks, one
# warp, PREFETCH), RNE (x, relu²(u)) and SR with wide Philox (dy, du)
PRESETS["nv_row1_exp_now"] = (
    quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1 | {"q_ptr": "*bf16"},
    _NV_ROW1_NOW | dict(EXP=1, BR=4, NB=8, PREFETCH=True), 1, 1, 4 * 8 * 16)
PRESETS["nv_row1_sr_exp_now"] = (
    quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1 | {"q_ptr": "*bf16"},
    _NV_ROW1_NOW | dict(EXP=1, SR=2, BR=4, NB=8, PREFETCH=True, PHILOX=1), 1, 1,
    4 * 8 * 16)


PRESETS["nv_col_rht_now"] = (                    # an RHT column view alone, codes, REG_COL RNE
    quant_nvfp4_reg.nvfp4_rowcol_reg_kernel, NV_REG,
    _NV_REG | dict(NI=8, BC=32, ROW=False, FAST_E2M1=True, PREFETCH=True), 2, 1, 128 * 32)
# session 59: SR codes with each random byte placed by one prmt (ROW1's SR_PRMT: PHILOX bit 1)
PRESETS["nv_row1_sr_prmt"] = (
    quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
    _NV_ROW1_NOW | dict(SR=2, BR=2, NB=32, PREFETCH=True, PHILOX=3), 1, 1, 2 * 32 * 16)
PRESETS["nv_row1_rht_now"] = (                   # a row view with the RHT, codes (1x16_rht)
    quant_nvfp4_row.nvfp4_row_kernel, NV_ROW1,
    _NV_ROW1_NOW | dict(RHT=True, BR=2, NB=32, PREFETCH=True), 1, 1, 2 * 32 * 16)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(PRESETS))
    ap.add_argument("--sass", default=None, help="write each SASS listing into this folder")
    args = ap.parse_args(argv)
    print(f"# triton {triton.__version__}, sm_90, compiled offline")
    print(f"{'kernel':16} {'warps':>5} {'regs':>5} {'stack':>5} {'smem KB':>8} {'SASS':>6} "
          f"{'per elem':>8}  top opcodes")
    for name in args.names:
        fn, sig, consts, warps, stages, elems = PRESETS[name]
        k = compile_sm90(fn, sig, consts, warps, stages)
        usage, ops, sass = inspect(k)
        total = sum(ops.values())
        per_elem = total * warps * 32 / elems
        top = ", ".join(f"{o} {n}" for o, n in ops.most_common(6))
        print(f"{name:16} {warps:5d} {usage.get('REG', 0):5d} {usage.get('STACK', 0):5d} "
              f"{k.metadata.shared / 1024:8.1f} {total:6d} {per_elem:8.1f}  {top}")
        if args.sass:
            Path(args.sass).mkdir(parents=True, exist_ok=True)
            (Path(args.sass) / f"{name}.sass").write_text(sass)


if __name__ == "__main__":
    main()
