"""End-to-end training speed: tokens/s, step time and peak memory, each recipe against bf16.

    python benchmarks/bench_train.py --models 125m                 # every recipe, one size
    python benchmarks/bench_train.py --models 50m,125m,350m,1b --torchao
    python benchmarks/bench_train.py --models 125m --profile nvfp4  # + a profiler breakdown
    python benchmarks/bench_train.py --models micro --device cpu --steps 2 --compile none  # smoke
    python benchmarks/bench_train.py --models 1b --graph step \
        --recipes bf16,nvfp4,nvfp4@nv-group,bf16 --repeat 3   # an A/B alternated, summarised

One process, one model size at a time, every recipe with the *same* settings: the harness's
decoder (``microscale.train.model``), fp32 master weights, bf16 autocast, fused AdamW, fixed
random tokens (the speed does not depend on the text), the same batch. Each run builds the
model, converts it (``ms.convert`` with the recipe's defaults, so FP4 recipes keep their last
15% of blocks in bf16, as a user gets; ``quantized`` says which share of the block-linear
weights is quantized), compiles every block (``--compile blocks``, the harness's default:
one graph per distinct block, the quantized layers are custom ops inside it), then times
``--steps`` steps after ``--warmup``: CUDA events per step, the median of the second half.
Peak memory is ``torch.cuda.max_memory_allocated`` from the second step on (weights, grads,
AdamW state and activations; with ``--graph step`` the graph's pool, allocated at capture). The bf16 baseline is the *best* bf16: compiled the same way,
fused AdamW, the same ``--graph`` setting; ``--bf16-also model:none,...`` adds bf16 runs with
other compile/graph settings, and the fastest bf16 run is the baseline of every ratio.
``--graph step`` captures the whole step (forward, backward, AdamW with ``capturable``) in one
CUDA graph after warm-up and times its replays: no host work per step, for any recipe. After
each step the gradients are set to None (``--keep-grads``: zeroed in place, the loop before
session 22, which adds every weight gradient into a zeroed tensor). ``--torchao`` adds torchao float8 training (tensorwise and
rowwise) with the same settings when torchao is installed (``pip install torchao``).

A recipe may name kernel settings after an ``@`` (``KERNEL_SETS``): ``fp8_blockwise@sub`` runs
fp8_blockwise with the previous (sub-tiled) row + column quantizers, in the same process as the
default kernels, so the two rows compare against the same bf16 run.

``--profile RECIPE`` records one step of that recipe with torch.profiler and splits the GPU
time into quantize / dequantize / GEMM / attention / norm+elementwise / optimizer kernels, plus
the idle time (wall minus GPU busy), the number of kernel launches and the gaps between
kernels (by the kind of kernel that ends each gap). With ``--graph step`` the recorded step is
one replay of the captured graph, as timed; else the kernels are launched eagerly.

Prints a table per model and ends with one JSON line (``--out`` also writes it to a file).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.tensor import QFormat  # noqa: E402
from microscale.train.model import build_model, flops_per_token  # noqa: E402
from microscale.train.speed import warmup_stream  # noqa: E402
from microscale.train.trainer import compile_blocks, peak_flops  # noqa: E402

RECIPES = ("bf16", "fp8_tensorwise", "fp8_blockwise", "mxfp8", "mxfp4", "nvfp4", "nvfp4_no_sr")
TORCHAO = ("torchao_tensorwise", "torchao_rowwise")
BATCH = {"1b": (8, 2048)}                 # (batch, seq); every other size: 16 x 1024
TARGETS = {"125m": {"fp8_blockwise": 0.9, "fp8_tensorwise": 0.9, "mxfp8": 0.85, "nvfp4": 0.75},
           "1b": {"fp8_blockwise": 1.2, "fp8_tensorwise": 1.2, "mxfp8": 1.1, "nvfp4": 0.9}}
TARGET_ANY = {"125m": 0.6, "1b": 0.8}
# recipe@NAME: kernel CONFIG entries set for that run only, {module: {key: value}}; spelled out
# in full, so a name runs the same kernels whatever the defaults ("reg" is what session 6's
# first call ran under that name: the register kernels with the explicit NaN byte)
_NV_REG = {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 2, "NUM_STAGES": 1,
           "maxnreg": None}
KERNEL_SETS = {
    "reg": {"quant_fp8": {"ROWCOL": "reg", "NAN_SEL": True},
            "quant_mx": {"ROWCOL": "reg", "NAN_SEL": True}},
    "reg-nan0": {"quant_fp8": {"ROWCOL": "reg", "NAN_SEL": False},
                 "quant_mx": {"ROWCOL": "reg", "NAN_SEL": False}},
    "sub": {"quant_fp8": {"ROWCOL": "sub"}, "quant_mx": {"ROWCOL": "mx"}},
    # session 7: NVFP4's quantize pass, the register-layout one or session 6's rows pass
    "nv-reg": {"quant_nvfp4": {"PASS": "reg"}},      # REG['ROW_SR'] as the default says
    "nv-reg-sr": {"quant_nvfp4": {"PASS": "reg", "REG": {**_NV_REG, "ROW_SR": True}}},
    "nv-rows": {"quant_nvfp4": {"PASS": "rows"}},
    # session 15: the reg pass writes column views asked for expanded itself (REG['COL_EXP'])
    "nv-reg-colexp": {"quant_nvfp4": {"PASS": "reg", "REG": {**_NV_REG, "ROW_SR": False,
                                                             "COL_EXP": True}}},
    # session 8: each weight quantized in its layer's call, not all at once per step
    # session 40: the NVFP4 row kernel as it was before PREFETCH (session 40 calls 1-2; expanded
    # row views alone on the reg pass, codes at two warps a program)
    "row1-old": {"quant_nvfp4:CONFIG.ROW1": {
        "expanded": False, "PREFETCH": False, "BR": 8, "NB": 8, "num_warps": 2,
        "PROGS_PER_SM": 32, "RNE_CODES": {"BR": 8, "NB": 16, "num_warps": 2, "PROGS_PER_SM": 16},
        "SR_CODES": {"BR": 4, "NB": 8, "num_warps": 1, "PROGS_PER_SM": 32}}},
    # session 40: the reg pass's column view alone at [256, 16] tiles, 5 programs an SM, the
    # next tile loaded first (quant_nvfp4.CONFIG['REG_COL']['PREFETCH']; the RNE column views
    # too); "col-old": as before session 41 made it the default for the SR column views
    "col-pf16": {"quant_nvfp4:CONFIG.REG_COL": {"NI": 16, "BC": 16, "num_warps": 4,
                                                "PROGS_PER_SM": 5, "NUM_STAGES": 1,
                                                "PREFETCH": True, "RNE": {}}},
    "col-old": {"quant_nvfp4:CONFIG.REG_COL": {"NI": 16, "BC": 32, "num_warps": 4,
                                               "PROGS_PER_SM": 3, "NUM_STAGES": 2,
                                               "PREFETCH": False, "RNE": {
                                                   "PROGS_PER_SM": 4, "NUM_STAGES": 1}}},
    # session 41: the row kernel's Philox with each round's products as two multiplies, as
    # before PHILOX_WIDE (calls 3-4 ran this as "pack0": {"PACK": 0}, PACK's bit 1 being
    # today's PHILOX_WIDE; bit 2 was dropped)
    "philox-mulhilo": {"quant_nvfp4:CONFIG.ROW1": {"PHILOX_WIDE": False}},
    "nogroup": {},
    # session 48: fp8_blockwise's fprop/dgrad on cuBLASLt, not DeepGEMM (where it is installed)
    "cublas": {"gemm_deepgemm": {"ENABLED": False}},
    # session 49: DeepGEMM chosen per shape by timing (the default); "dg-prior": session 48's
    # rule without timing (fprop/dgrad on DeepGEMM, wgrad on cuBLASLt); "dg-always": DeepGEMM
    # for every blockwise GEMM it takes
    "dg-prior": {"gemm_deepgemm": {"CHOICE": "prior"}},
    "dg-always": {"gemm_deepgemm": {"CHOICE": "always"}},
    # session 48: q, k and v as three projections (the zoo's layout) or one
    # (ModelConfig.fused_qkv), whatever --qkv says for the run's other rows (MODEL_SUFFIXES)
    "three-qkv": {},
    "fused-qkv": {},
    # session 46: FP8 128x128 weights in one launch through the old tile code, as before
    "many-tile": {"quant_many": {"KERNEL": "tile"}},
    # session 46: weights grouped at any size (1b's too; MXFP8's then cached expanded)
    "group-all": {"nn.weight_cache": {"GROUP_MAX_MEAN_NUMEL": 1 << 40}},
    # the same with MXFP8 weights cached as codes (2.06 bytes a parameter, not 4.06)
    "group-all-codes": {"nn.weight_cache": {"GROUP_MAX_MEAN_NUMEL": 1 << 40,
                                            "EXPAND_MXFP8": False}},
    # session 54: NVFP4 16x16 weights grouped too (amaxes, then every W, in two launches a
    # step; GROUP_FORMATS leaves NVFP4 out since session 26's 125m A/B on an H100); call 2,
    # 1b: 0.8751x / 0.8797x against 0.8922x / 0.8934x in one process, not taken; session
    # 55 (its kernels aligned: 2.98 ms for the 1b weights, 5.67 before), call 3: 0.9029x /
    # 0.8969x against 0.8993x / 0.9068x / 0.9000x, level, not taken; session 56 (Wᵀ's scale
    # bytes from the kernel), 125m: +0.9%, so small NVFP4 weights are grouped by default
    # ("nvfp4@nogroup" is that A/B now); 1b stays per layer (GROUP_MAX_MEAN_NUMEL)
    "nv-group": {"nn.weight_cache": {"GROUP_MAX_MEAN_NUMEL": 1 << 40, "GROUP_FORMATS": frozenset(
        {QFormat.FP8_BLOCK, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2, QFormat.NVFP4})}},
    # session 12: the MLP's down projection keeps the activation's sources for backward, not
    # its quantized input's column view (ms.Linear.recompute_input, microscale.nn.recompute);
    # session 15: on by default where that view is FP8, so "no-recompute" is the A/B there
    "recompute": {},
    "no-recompute": {},
    # session 14: MXFP4 views written as codes and decoded by the op (before: the kernel writes
    # the expanded views the layer asks for)
    "mx-codes": {"quant_mx": {"EXPAND": False}},
    # session 14: the MX kernel's tile (BR x BC, warps, programs per SM) for MXFP4's pairs
    "mx-8w": {"quant_mx": {"BR": 32, "BC": 128, "num_warps": 8, "PROGS_PER_SM": 4}},
    "mx-64x64": {"quant_mx": {"BR": 64, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 8}},
    # session 14: MXFP4 column views the older way ([G, 32, BC] tile, cross-thread reductions,
    # the RHT as an FMA dot) instead of a 32-row block in one thread (quant_mx_col)
    "mx-col-old": {"quant_mx": {"COL_REG": False}},
    # session 14: NVFP4 dy pairs in the rows pass (before: two reg-pass launches, the column
    # view and the SR row view alone, quant_nvfp4.CONFIG['SPLIT'])
    "nv-nosplit": {"quant_nvfp4": {"SPLIT": False}},
    # session 16: SR dy pairs split (two reg-pass launches) at every width, or only above
    # 4096 columns (1b's 6144/8192-wide dy), against the rows pass
    "nv-split": {"quant_nvfp4": {"SPLIT": True, "SPLIT_MIN_COLS": 0}},
    "nv-split-wide": {"quant_nvfp4": {"SPLIT": True, "SPLIT_MIN_COLS": 4097}},
    # session 16: NVFP4's α applied by the consumer to cuBLAS's fp32 output (before: the Triton
    # GEMM applies it in its epilogue and writes bf16, gemm_paths.EPILOGUE)
    "no-alpha-epi": {"gemm_paths:EPILOGUE": {"alpha": False}},
    # session 26: the alpha GEMM's one tile for every shape (before SMALL_TILE)
    "alpha-one-tile": {"gemm_alpha": {"SMALL_NK": 0}},
    # session 59: the alpha GEMM without session 58's 128x128 tile for narrow outputs
    "no-narrow": {"gemm_alpha": {"NARROW_TILE": None}},
    # session 26: NVFP4's amax pass into a zeroed buffer by atomics (before AMAX_PARTIALS)
    "amax-atomic": {"quant_nvfp4": {"AMAX_PARTIALS": False}},
    # session 16: a pair whose column view is asked for expanded (nvfp4_no_sr's dy) on the rows
    # pass, which writes it expanded, instead of the reg pass + a decode pass: at every width
    # (call 4), never (the default before), or up to 4096 columns (the default since call 5)
    "nv-expcol-rows": {"quant_nvfp4": {"EXP_COL_ROWS_MAX_COLS": 1 << 30}},
    "nv-expcol-reg": {"quant_nvfp4": {"EXP_COL_ROWS_MAX_COLS": 0}},
    # session 17: MoE NVFP4 token views through the older per-view grouped kernels (a padded
    # copy, hash SR bytes, amax + quantize per view) instead of the register-layout ones
    "grp-nv-old": {"grouped": {"NVFP4_REG": False}},
    # session 17: MoE NVFP4 row views (the GEMMs' A operands) as codes that the grouped GEMM
    # decodes in a pass of its own, not written expanded by the quantizer
    "grp-nv-codes": {"nn.grouped": {"EXPAND_ROWS": False}},
    # session 18: an NVFP4 layer's W and Wᵀ as two 16×16 code views, each decoded by its GEMM,
    # instead of one expanded view whose transpose dgrad reads (nn.function "one weight view")
    "w-two-views": {"nn.function": {"ONE_WEIGHT_VIEW": False}},
    # session 18: the MoE experts' NVFP4 W and Wᵀ as two code views, each decoded by its
    # grouped GEMM, instead of one expanded view whose transposes dgrad reads (nn.grouped)
    "grp-w-two-views": {"nn.grouped": {"ONE_WEIGHT_VIEW": False}},
    # session 18: the MoE experts' FP8 128x128 column view quantized again from a transposed
    # copy of w instead of transposing the row view's codes and tile scales
    "grp-fp8-w-requant": {"ops_experts": {"TILE_TRANSPOSE": False}},
    # session 18: the NVFP4 amax pass with 4 programs an SM asked where 3 fit (the default
    # before call 2)
    # (the whole dict replaced: REVERSE, added in session 20, is off as then)
    "nv-amax-4": {"quant_nvfp4": {"REG_AMAX": {"NI": 16, "BC": 32, "num_warps": 4,
                                               "PROGS_PER_SM": 4, "NUM_STAGES": 2,
                                               "REVERSE": False}}},
    # session 50: the amax pass's launch on the H200, where it reads at an estimated ~55% of
    # the copy rate (bench_quant.py's nvfp4/amax_pass sweep); session 51 call 1, 1b nvfp4:
    # p4 0.8806x against the default's 0.8864x
    "nv-amax-p4": {"quant_nvfp4:CONFIG.REG_AMAX": {"PROGS_PER_SM": 4}},
    "nv-amax-p4r": {"quant_nvfp4:CONFIG.REG_AMAX": {"PROGS_PER_SM": 4, "maxnreg": 128}},
    "nv-amax-w8": {"quant_nvfp4:CONFIG.REG_AMAX": {"num_warps": 8, "PROGS_PER_SM": 2}},
    # session 50: the amax pass's RHT with its last stage as pair maxima (REG_AMAX["PAIRS"]),
    # alone and with 4 programs; session 51 call 1, 1b nvfp4: 0.8867x / 0.8849x against
    # 0.8864x without. On by default since (nv-amax-nopairs: the pass before)
    "nv-amax-pairs": {"quant_nvfp4:CONFIG.REG_AMAX": {"PAIRS": True}},
    "nv-amax-nopairs": {"quant_nvfp4:CONFIG.REG_AMAX": {"PAIRS": False}},
    "nv-amax-pairs-p4": {"quant_nvfp4:CONFIG.REG_AMAX": {"PAIRS": True, "PROGS_PER_SM": 4}},
    # session 19: nvfp4_no_sr's dy pairs (column view wanted expanded) on the rows pass up to
    # 4096 columns and the reg pass + a decode pass above, instead of split into two reg-pass
    # launches that each write their view expanded (quant_nvfp4.CONFIG['SPLIT_EXP_COL'])
    "nv-nosplit-expcol": {"quant_nvfp4": {"SPLIT_EXP_COL": False}},
    # session 19: MXFP8 A operands (x, dy) as codes that the GEMM's dequantize pass decodes,
    # instead of written expanded by the register pair kernel (nn.function EXPAND_MXFP8)
    "mx8-codes": {"nn.function": {"EXPAND_MXFP8": False}},
    # session 20: the NVFP4 reg amax pass walks its tiles forwards (before: backwards, so that
    # the quantize pass after it starts on tiles still in L2)
    "nv-amax-fwd": {"quant_nvfp4:CONFIG.REG_AMAX": {"REVERSE": False}},
    # session 21: FP8 128x128 weight pairs (fp32 masters, one launch per weight at 1b) in 8
    # warps instead of 4
    "fp8w-8w2": {"quant_fp8": {"num_warps_rowcol": 8, "PROGS_PER_SM_rowcol": 2}},
    "fp8w-8w4": {"quant_fp8": {"num_warps_rowcol": 8, "PROGS_PER_SM_rowcol": 4}},
    # session 21: the MXFP8 register pair kernel on [128, 128] tiles at 2 programs an SM (the
    # default before), [64, 128] at 3, [32, 128] with 2 warps at 6 (the default since call 8).
    # (Call 7's "mx8-br64w2", [64, 128] with 2 warps, gave the x pair other bits on the H100:
    # refused since)
    "mx8-br128": {"quant_mx": {"BR_reg": 128, "num_warps_reg": 4, "PROGS_PER_SM_reg": 2,
                               "NUM_STAGES_reg": 1}},
    "mx8-br64": {"quant_mx": {"BR_reg": 64, "num_warps_reg": 4, "PROGS_PER_SM_reg": 3,
                              "NUM_STAGES_reg": 1}},
    "mx8-br32": {"quant_mx": {"BR_reg": 32, "num_warps_reg": 2, "PROGS_PER_SM_reg": 6,
                              "NUM_STAGES_reg": 1}},
    # session 43: the register pair kernels' tile loop software-pipelined (the next tile's
    # loads in flight as cp.async into shared memory while this one is quantized)
    "mx8-s1": {"quant_mx": {"NUM_STAGES_reg": 1}},      # (1, the default)
    "mx8-s2": {"quant_mx": {"NUM_STAGES_reg": 2}},
    "mx8-s3": {"quant_mx": {"NUM_STAGES_reg": 3}},
    # session 43: the MXFP8 pair kernel on [32, 64] tiles with one warp (no cross-warp maxima)
    "mx8-bc64": {"quant_mx": {"BC_reg": 64, "num_warps_reg": 1, "PROGS_PER_SM_reg": 12}},
    "mx8-bc64p16": {"quant_mx": {"BC_reg": 64, "num_warps_reg": 1, "PROGS_PER_SM_reg": 16}},
    # session 44: the MXFP8 pair kernel on taller tiles, software-pipelined
    "mx8-128w8s2": {"quant_mx": {"BR_reg": 128, "num_warps_reg": 8, "PROGS_PER_SM_reg": 2,
                                 "NUM_STAGES_reg": 2}},
    "mx8-64w4s2": {"quant_mx": {"BR_reg": 64, "num_warps_reg": 4, "PROGS_PER_SM_reg": 4,
                                "NUM_STAGES_reg": 2}},
    # the FP8 pair's stages (2 the default since session 43's call 4, 3 since session 44,
    # where the variants staging twice the bytes keep NUM_STAGES_reg_wide, 2)
    "fp8-s1": {"quant_fp8": {"NUM_STAGES_reg": 1}},
    "fp8-s2": {"quant_fp8": {"NUM_STAGES_reg": 2}},
    "fp8-s3": {"quant_fp8": {"NUM_STAGES_reg": 3}},
    # session 43: NVFP4's round-to-nearest column views (the x pairs' RHT'd column view) with
    # the tile loop software-pipelined
    "nv-colrne-s2": {"quant_nvfp4:CONFIG.REG_COL": {"RNE": {"BC": 32, "PROGS_PER_SM": 4,
                                                            "NUM_STAGES": 2,
                                                            "PREFETCH": False}}},
    # session 52: the recomputed relu²(u) column view (REG_COL["RNE"]'s launch, 168
    # registers: 6 programs of 2 warps fit an SM) at 4 (the default before 08215ee), 5 and 6
    # (the default since) programs an SM; and the x pairs split (column view, then the row
    # view alone) up to 2048 columns, not 1024 (call 2, 1b: 0.8891x against 0.8897x)
    "nv-colrne-p4": {"quant_nvfp4:CONFIG.REG_COL.RNE": {"PROGS_PER_SM": 4}},
    "nv-colrne-p5": {"quant_nvfp4:CONFIG.REG_COL.RNE": {"PROGS_PER_SM": 5}},
    "nv-colrne-p6": {"quant_nvfp4:CONFIG.REG_COL.RNE": {"PROGS_PER_SM": 6}},
    "nv-xsplit-2048": {"quant_nvfp4": {"SPLIT_X_MAX_COLS": 2048}},
    # session 52, call 2's fastest alone: the SR column views (du, dy) at [256, 32], 3
    # programs of 4 warps (166 registers), beside the relu² view at 6 programs. Call 3, 1b
    # nvfp4 alternated in one process: 0.8908x / 0.8915x against the default's 0.8952x /
    # 0.8943x (0.8 ms a step slower, although each view ran 5% faster alone)
    "nv-cols52": {"quant_nvfp4:CONFIG.REG_COL": {"BC": 32, "PROGS_PER_SM": 3},
                  "quant_nvfp4:CONFIG.REG_COL.RNE": {"PROGS_PER_SM": 6}},
    # session 52 (d0c775a), again in 53: a split pair's column view (dy, du) rotating without
    # the RHT's input clamp where the amax pass's max|x| allows (quant_nvfp4.CONFIG
    # ["COL_UNCLAMPED"]; 1b in session 52's call 6: 0.8885x against 0.8907x off; session 54
    # call 5, with every x pair split: 0.8954x / 0.8992x against 0.8934x / 0.8939x, on by
    # default since)
    "nv-col-unclamped": {"quant_nvfp4": {"COL_UNCLAMPED": True}},
    "nv-col-clamped": {"quant_nvfp4": {"COL_UNCLAMPED": False}},
    # session 55: expanded FP4 operands' block scales handed to the GEMM op again (unread;
    # under the compiler each NVFP4 weight's transposed tile scales are then computed for
    # dgrad's Wᵀ, six launches a layer: ops_gemm.CONFIG["SCALES_OF_EXPANDED"])
    "mm-scales": {"ops_gemm": {"SCALES_OF_EXPANDED": True}},
    # session 53: the row kernel's expanded views (training's split pairs' row launches: du,
    # dy, relu²(u)) at other [BR, NB] block tiles of one warp (the default [4, 8]): whole
    # 512-byte row runs ([2, 16]) or shorter ones ([8, 4])
    "nv-row1-2x16": {"quant_nvfp4:CONFIG.ROW1": {"BR": 2, "NB": 16}},
    "nv-row1-8x4": {"quant_nvfp4:CONFIG.ROW1": {"BR": 8, "NB": 4}},
    # session 53: du's NVFP4 amaxes measured by the amax pass again, not in the down
    # projection's dgrad epilogue (nn.mlp.CONFIG["DU_AMAX_IN_DGRAD"], on by default)
    "du-amax-off": {"nn.mlp": {"DU_AMAX_IN_DGRAD": False}},
    # and relu(u)²'s, measured in the up projection's fprop epilogue (U_AMAX_IN_FPROP): both off
    "gemm-amax-off": {"nn.mlp": {"DU_AMAX_IN_DGRAD": False, "U_AMAX_IN_FPROP": False}},
    "u-amax-off": {"nn.mlp": {"U_AMAX_IN_FPROP": False}},
    # session 22: the zoo's relu² MLP as two autograd nodes (du written out in bf16 and read
    # back by the up projection's dy quantizer) instead of one (microscale.nn.mlp)
    "mlp-unfused": {"nn.mlp": {"FUSE": False}},
    # session 45: grouped MXFP8 weights (ms.weight_cache, one launch) cached as codes, which
    # both GEMMs then decode per call, instead of expanded (nn.weight_cache.CONFIG)
    "mx8-w-codes": {"nn.weight_cache": {"EXPAND_MXFP8": False}},
    # session 25: wgrad's xᵀ kept expanded where its GEMM decodes it (MXFP8, FP4: bf16, no
    # decode pass in backward; 2 bytes an element kept instead of 1 or 0.56)
    "xt-expanded": {"nn.function": {"EXPAND_XT": True}},
    # session 45: xᵀ kept as codes in every layer (before "auto", the default since then)
    "xt-codes": {"nn.function": {"EXPAND_XT": False}},
    # session 27: wgrad's kept xᵀ decoded inside its GEMM, not by the expand op (one decode
    # per GEMM; with the op, q/k/v's shared xᵀ is decoded once)
    "no-decode-op": {"nn.function": {"DECODE_XT_OP": False}},
    # session 27: MX / FP8 blockwise pairs return each view's amax, the column's a copy out of
    # the kernels' two-amax buffer (before SHARE_COL_AMAX)
    "no-share-amax": {"ops": {"SHARE_COL_AMAX": False}},
    # session 27: the down projection's dgrad GEMM writes du (the relu² backward in NVFP4's α
    # GEMM's epilogue), and the up projection's dy views are quantized from du alone
    "du-epi": {"nn.mlp": {"DU_IN_DGRAD": True}},
    "no-du-epi": {"nn.mlp": {"DU_IN_DGRAD": False}},       # session 28: on by default
    # session 27: NVFP4 expanded row views take their block maxima with NaN kept, no
    # per-element NaN select (EXP_NAN_MAX; on by default since session 28)
    "exp-nan-max": {"quant_nvfp4": {"EXP_NAN_MAX": True}},
    "no-exp-nan-max": {"quant_nvfp4": {"EXP_NAN_MAX": False}},
    # session 28: the NVFP4 amax pass's column RHT without its input clamp, checked per
    # program instead (quant_nvfp4.CONFIG["AMAX_UNCLAMPED"], on by default since call 2)
    "amax-unclamped": {"quant_nvfp4": {"AMAX_UNCLAMPED": True}},
    "no-amax-unclamped": {"quant_nvfp4": {"AMAX_UNCLAMPED": False}},
    # session 28: the three above off (session 27's defaults)
    "s27": {"nn.mlp": {"DU_IN_DGRAD": False},
            "quant_nvfp4": {"EXP_NAN_MAX": False, "AMAX_UNCLAMPED": False}},
    # session 31: a row view alone (the split pairs' second launch) on the row kernel
    # (quant_nvfp4_row: a 16-element block a thread) or on the reg pass
    "row1": {"quant_nvfp4:CONFIG.ROW1": {"expanded": True}},
    # session 32: the same with the row kernel's scale bytes stored from the thread that
    # holds them (CONFIG["ROW1"]["STORE64"]: no regrouping through shared memory)
    "row1-s64": {"quant_nvfp4:CONFIG.ROW1": {"expanded": True, "STORE64": True}},
    "no-row1": {"quant_nvfp4:CONFIG.ROW1": {"expanded": False}},
    # session 31: the reg pass's E2M1 codes from the rounded value (CONFIG["FAST_E2M1"]; on by
    # default since session 32) or from the compare-and-select chain
    "fast-e2m1": {"quant_nvfp4": {"FAST_E2M1": True}},
    "no-fast-e2m1": {"quant_nvfp4": {"FAST_E2M1": False}},
    # (session 33 call 4's "alpha-fp32" put NVFP4's α in the Triton GEMM's epilogue for fp32
    # outputs too: 125m nvfp4 0.752x -> 0.640x; removed, run that call's script at 1b85908)
    # NVFP4's dequant-path GEMMs on cuBLAS with an fp32 output and α multiplied after, instead
    # of the α kernel (gemm_paths.EPILOGUE["alpha"] off: session 16's A/B, as a kernel set)
    "alpha-off": {"gemm_paths:EPILOGUE": {"alpha": False}},
    # session 39: NVFP4's α in the Triton GEMM's epilogue for fp32 outputs (wgrad's) with at
    # least N 128x256 output tiles (gemm_paths.EPILOGUE["fp32_min_tiles"]; 128 by default
    # since call 1), or never (cuBLAS's fp32 sum, then α in a pass of its own)
    "alpha-fp32-128": {"gemm_paths:EPILOGUE": {"fp32_min_tiles": 128}},
    "alpha-fp32-256": {"gemm_paths:EPILOGUE": {"fp32_min_tiles": 256}},
    "alpha-fp32-512": {"gemm_paths:EPILOGUE": {"fp32_min_tiles": 512}},
    "no-alpha-fp32": {"gemm_paths:EPILOGUE": {"fp32_min_tiles": None}},
    # session 32: a round-to-nearest column view alone at the base REG_COL tile (3 programs an
    # SM, 2 stages) instead of REG_COL["RNE"]'s (4, 1)
    "col-rne-base": {"quant_nvfp4:CONFIG.REG_COL": {"RNE": {}}},
    # session 28: the reg amax pass at 4 programs an SM (3 since session 18, when it needed 152
    # registers a thread; 128 now, so 4 CTAs of 4 warps fit the register file)
    "amax-progs4": {"quant_nvfp4:CONFIG.REG_AMAX": {"PROGS_PER_SM": 4}},
    # (session 29, call 4: "alpha-e2" / "alpha-e3" read the α GEMM epilogue op's two e
    # half-tiles together, by TMA or pointer loads: 125m level, 1b 0.5-1.2% slower; removed,
    # run that call's script at its commit)
    # session 28, call 4 (a rule since removed): "alpha-flat" was the α GEMM flattened at every
    # K against the TILE unflattened from K >= 6144; 1b nvfp4 ran 0.6% faster flattened
    # session 27: DECODE_XT_OP and SHARE_COL_AMAX off (session 26's code)
    "s26": {"nn.function": {"DECODE_XT_OP": False}, "ops": {"SHARE_COL_AMAX": False}},
    # session 25: NVFP4's x pairs as two reg-pass launches (the column view alone, then the row
    # view alone), as the SR dy pairs run, at every width ("nv-split-x"), or at none (in one
    # launch holding both views, "nv-split-x-off"); the default splits inputs <= 1024 wide
    "nv-split-x": {"quant_nvfp4": {"SPLIT_X_MAX_COLS": 1 << 30}},
    "nv-split-x-off": {"quant_nvfp4": {"SPLIT_X_MAX_COLS": 0}},
    # session 25: the one-launch x pair (inputs wider than 1024) on [256, 32] tiles, or in 8
    # warps at one program an SM: offline SASS (Triton 3.9) 254-255 registers with no stack
    # and ~60 instructions an element, against 255 + 480 bytes of stack and 52.9
    "nv-reg-bc32": {"quant_nvfp4:CONFIG.REG": {"BC": 32}},
    "nv-reg-w8": {"quant_nvfp4:CONFIG.REG": {"num_warps": 8, "PROGS_PER_SM": 1}},
    # session 22: FP8 128x128 weight pairs from the tile kernel (a transposing store for Wᵀ),
    # the default before, instead of the register pair kernel with one scale a tile
    "fp8w-tile": {"quant_fp8": {"W128": "tile"}},
    # session 20: the FP8 1x128 and MXFP8 register pair kernels walk their tiles forwards, the
    # order before (backwards since call 4: the producer's last writes may still be in L2;
    # calls 2-3 A/B'd it as "fp8-rev" / "mx8-rev", no-ops since it is the default)
    "fp8-fwd": {"quant_fp8": {"REVERSE_reg": False}},
    "mx8-fwd": {"quant_mx": {"REVERSE_reg": False}},
    # (session 20 call 4's "nv-split-fwd" A/B'd a backwards row launch of split NVFP4 pairs,
    # 1% slower at 1b and reverted: run that call's script at its commit)
    # (session 16 call 2's "nv-amax-nansel" A/B'd an amax-pass switch that was reverted after
    # it, in 4044fa3: run that call's script at ac6ad16)
}


GROUP_WEIGHTS = [True]           # --no-group-weights: one weight quantization per layer call
# --keep-grads: zero the gradients in place after each step (the loop before session 22), so
# every weight gradient is added into a zeroed tensor (a read-add-write per gradient, plus the
# zeroing); by default they are set to None, PyTorch's default, and backward writes each one
# once (under --graph step into the graph's pool, PyTorch's whole-network capture recipe)
KEEP_GRADS = [False]


@contextlib.contextmanager
def kernel_settings(recipe: str):
    """Apply ``KERNEL_SETS[name]`` for ``recipe@name`` (nothing for a plain recipe); restore.
    A key names a module of ``microscale.kernels`` (or ``nn.X`` and ``ops*``: modules of
    ``microscale`` itself); with ``module:NAME`` that module's dict ``NAME`` is updated
    instead of its ``CONFIG`` (``NAME.KEY``: the dict at ``NAME[KEY]``)."""
    name = recipe.partition("@")[2]
    if not name:
        yield
        return
    import importlib
    saved = []
    for key, entries in KERNEL_SETS[name].items():
        module, _, attr = key.partition(":")
        path = f"microscale.{module}" if module.startswith(("nn.", "ops")) else \
            f"microscale.kernels.{module}"
        name_, *keys = (attr or "CONFIG").split(".")       # "CONFIG.REG": a nested dict
        cfg = getattr(importlib.import_module(path), name_)
        for k in keys:
            cfg = cfg[k]
        saved.append((cfg, dict(cfg)))
        cfg.update(entries)
    try:
        yield
    finally:
        for cfg, old in saved:
            cfg.clear()
            cfg.update(old)


MODEL_OPTS: dict = {}        # ModelConfig overrides for every model of the run (--qkv)
# ModelConfig overrides of one row, by its recipe's @ suffix (KERNEL_SETS has them, empty)
MODEL_SUFFIXES = {"three-qkv": {"fused_qkv": False}, "fused-qkv": {"fused_qkv": True}}


def build(model_name: str, recipe: str, seq: int, device: torch.device):
    """The model for one run, converted for ``recipe`` (its @ suffix may change the model:
    ``MODEL_SUFFIXES``); returns (model, quantized share)."""
    torch.manual_seed(0)
    recipe, _, suffix = recipe.partition("@")
    opts = {**MODEL_OPTS, **MODEL_SUFFIXES.get(suffix, {})}
    model = build_model(model_name, max_seq_len=seq, **opts).to(device)
    if recipe.startswith("torchao_"):
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        moe = recipe == "torchao_moe_rowwise"
        cfg = Float8LinearConfig.from_recipe_name("rowwise" if moe else recipe.split("_", 1)[1])
        convert_to_float8_training(model, config=cfg,
                                   module_filter_fn=lambda m, fqn: isinstance(m, nn.Linear))
        if moe:
            torchao_moe_experts(model)
            _probe_torchao_moe(model, device)
        return model, 1.0
    if recipe != "bf16":
        report = ms.convert(model, recipe)
        share = report.gemm_share                # block GEMM weights (MoE experts included)
        from microscale.nn.weight_cache import groups_weights
        model._ms_group_weights = GROUP_WEIGHTS[0] and groups_weights(model)
        return model, share.quantized / share.total if share.total else 0.0
    return model, 0.0


def pad_token_groups(x: torch.Tensor, offs: torch.Tensor, align: int = 16):
    """Each expert's rows of ``x`` moved to start at a multiple of ``align`` (zero rows between
    groups), on the device: ``(x_pad, rows, offs_pad)`` with ``x_pad[rows] == x`` and int32
    group ends ``offs_pad``. FP8 grouped GEMMs need aligned groups (torchao asks for them;
    torchtitan pads in its token permutation); the padded row count is static, ``M + E·align``."""
    m, e = x.shape[0], offs.numel()
    counts = torch.diff(offs, prepend=offs.new_zeros(1))
    padded = (counts + align - 1) // align * align
    ends = torch.cumsum(padded, 0)
    r = torch.arange(m, device=x.device, dtype=offs.dtype)
    g = torch.searchsorted(offs, r, right=True)              # each row's expert
    rows = (ends - padded)[g] + r - (offs - counts)[g]
    x_pad = x.new_zeros(m + e * align, x.shape[1]).index_copy(0, rows, x)
    return x_pad, rows, ends.to(torch.int32)


def torchao_moe_experts(model) -> int:
    """torchao's FP8 rowwise MoE training path on the zoo MoE's experts: its differentiable
    ``_to_fp8_rowwise_then_scaled_grouped_mm`` (torchao ≥ 0.18; older: ``_scaled_grouped_mm``)
    as each ``Experts.grouped_mm``, counting its eager calls (``model._torchao_moe_calls``;
    not while Dynamo traces, where the count would be a guard and recompile every call) so that
    a model in which it never runs raises (:func:`_probe_torchao_moe`) instead of timing bf16
    under torchao's name. Token groups
    are padded to multiples of 16 first (:func:`pad_token_groups`; torchao 0.18's own padding,
    its default, is "not yet supported" and asserts), the output gathered back."""
    import inspect

    from microscale.train.moe import Experts
    try:
        from torchao.prototype.moe_training import _to_fp8_rowwise_then_scaled_grouped_mm as fn
    except ImportError:
        from torchao.prototype.moe_training import _scaled_grouped_mm as fn
    calls = model._torchao_moe_calls = [0]
    kw = ({"pad_token_groups_for_grouped_mm": False}
          if "pad_token_groups_for_grouped_mm" in inspect.signature(fn).parameters else {})

    def grouped_mm(x, w_t, offs):
        if not torch.compiler.is_compiling():
            calls[0] += 1
        x_pad, rows, offs_pad = pad_token_groups(x, offs)
        return fn(x_pad, w_t, offs_pad, out_dtype=x.dtype, **kw)[rows]
    experts = [m for m in model.modules() if isinstance(m, Experts)]
    if not experts:
        raise ValueError("torchao_moe_rowwise needs a zoo MoE model (moe-tiny, moe-1b)")
    for m in experts:
        m.grouped_mm = grouped_mm
    return len(experts)


def _probe_torchao_moe(model, device: torch.device) -> None:
    """One eager forward of 16 tokens, as a step runs it (bf16 autocast): torchao's grouped GEMM
    must have run in it, else the model does not call ``Experts.grouped_mm`` and a timing
    would be bf16's."""
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        model(torch.zeros(1, 16, dtype=torch.long, device=device))
    if model._torchao_moe_calls[0] == 0:
        raise RuntimeError("torchao_moe_rowwise: torchao's grouped GEMM never ran in a forward")


def apply_suffix(model, recipe: str) -> None:
    """The model-level settings of ``recipe@nogroup``, ``@recompute`` and ``@no-recompute``."""
    if recipe.endswith("@nogroup"):
        model._ms_group_weights = False
    if recipe.endswith("@recompute"):
        ms.set_recompute_input(model)
    if recipe.endswith("@no-recompute"):
        ms.set_recompute_input(model, False)


def train_step(model, opt, x, y) -> None:
    # a new step for Inductor's CUDA-graph trees (--mode reduce-overhead: the previous step's
    # graph outputs are dead); a no-op for every other mode
    torch.compiler.cudagraph_mark_step_begin()
    # as the harness's Trainer: FP8 128x128 weights all quantized in one launch per step
    with ms.weight_cache(model) if getattr(model, "_ms_group_weights", False) \
            else contextlib.nullcontext():
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            logits = model(x)
        F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    opt.step()
    # set to None: the next backward writes fresh gradients (a captured graph's come from its
    # pool, the same addresses every replay) instead of adding into zeroed ones
    opt.zero_grad(set_to_none=not KEEP_GRADS[0])


def make_step(model, opt, x, y, graph: str):
    """The step to time: eager launches, or one CUDA graph replay of the whole step (forward,
    backward, AdamW), captured after warm-up; the graph needs no host work per step. The
    warm-up runs on the process's one side stream (``speed.warmup_stream``: a new stream per
    run kept a cuBLAS workspace alive each, so before session 28 every later run of a process
    peaked ~67 MB higher)."""
    if graph == "none":
        return lambda: train_step(model, opt, x, y)
    side = warmup_stream(x.device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            train_step(model, opt, x, y)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        train_step(model, opt, x, y)
    return g.replay


def run_one(model_name: str, recipe: str, args, device: torch.device, compile_how: str,
            graph: str) -> dict:
    with kernel_settings(recipe):
        return _run_one(model_name, recipe, args, device, compile_how, graph)


def setup(model_name: str, recipe: str, args, device: torch.device):
    """(model, quantized share, x, y): the model for ``recipe`` with its ``@`` settings applied
    (:func:`apply_suffix`) and the run's fixed batch, tokens drawn from a seeded generator."""
    batch, seq = BATCH.get(model_name, (args.batch, args.seq))
    model, share = build(model_name, recipe, seq, device)
    apply_suffix(model, recipe)
    g = torch.Generator(device=device).manual_seed(1)
    x = torch.randint(0, 256, (batch, seq), device=device, generator=g)
    return model, share, x, torch.roll(x, -1, 1)


def _run_one(model_name: str, recipe: str, args, device: torch.device, compile_how: str,
             graph: str) -> dict:
    model, share, x, y = setup(model_name, recipe, args, device)
    batch, seq = x.shape
    t0 = time.perf_counter()
    if compile_how == "blocks":
        compile_blocks(model, args.mode)
    elif compile_how == "model":
        model = torch.compile(model, mode=None if args.mode == "default" else args.mode)
    graph = graph if device.type == "cuda" else "none"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda",
                            capturable=graph == "step")
    train_step(model, opt, x, y)                       # compiles; AdamW state allocated
    _sync(device)
    compile_s = time.perf_counter() - t0
    if device.type == "cuda":   # the peak of a training step: warm-up steps, the capture, replays
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(args.warmup - 1):
        train_step(model, opt, x, y)
    step = make_step(model, opt, x, y, graph)
    times = _timed(step, args.steps, device)
    step_s = statistics.median(times[len(times) // 2:])
    cfg = (model._orig_mod if hasattr(model, "_orig_mod") else model).config
    tok_s = batch * seq / step_s
    peak = peak_flops(device)
    row = {"model": model_name, "recipe": recipe, "compile": compile_how, "graph": graph,
           "batch": f"{batch}x{seq}",
           "quantized": round(share, 3), "step_ms": step_s * 1e3, "tok_s": tok_s,
           "mfu": tok_s * flops_per_token(cfg, seq) / peak if peak else None,
           "peak_gb": torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None,
           "compile_s": compile_s,
           # whether each step ran inside ms.weight_cache (the weights quantized together)
           "grouped": bool(getattr(model, "_ms_group_weights", False)),
           # which kernel path each quantize / GEMM op of this model took (ms.explain())
           "paths": {f"{op}({key})": path for (op, key), path in ms.explain(model).items()}}
    del model, opt, step
    _free(device)
    return row


def _timed(fn, steps: int, device: torch.device) -> list[float]:
    """Seconds per call: CUDA events around each (no host sync inside the loop)."""
    if device.type != "cuda":
        out = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(steps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [s.elapsed_time(e) / 1e3 for s, e in events]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free(device):
    gc.collect()
    torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- profile
# (kind, name fragments), first match wins: microscale's own kernels, then Inductor's fused
# kernels (named after the ops they fuse, quantize_rowcol included), attention before GEMMs
# (cuDNN's flash kernels carry "sm90" too), then library GEMMs and the rest.
# Every Triton kernel of microscale.kernels has its kind here (tests/test_bench_train.py scans
# the package: a new kernel missing from this table fails it, instead of landing in "other"
# as the NVFP4 row kernel did from session 31 to 45).
_KINDS = (("quantize", ("nvfp4_rows_kernel", "nvfp4_row_kernel", "nvfp4_v3_kernel",
                        "_nvfp4_quant_kernel", "_nvfp4_amax_kernel",
                        "_mx_kernel", "_fp8_block_kernel", "_cast_kernel", "_amax_kernel",
                        "rowcol_reg_kernel", "_fp8_rowcol_sub_kernel", "amax_reg_kernel",
                        "_many_kernel", "_quant_kernel", "_sr_bytes_kernel",
                        "_grouped_reg_kernel")),
          ("dequantize", ("_dequant_kernel", "_scale_inplace")),
          # the grouped (MoE) GEMM's kernels and padded layout, before "reduce_kernel" below;
          # MXFP8 on FP8 tensor cores with its scale-preparing pass
          ("gemm", ("_tokens_kernel", "_tokens_tma_kernel", "_reduce_kernel",
                    "_reduce_tma_kernel", "_alpha_mm", "_mxfp8_kernel", "_mxfp8_wgmma_kernel",
                    "_prepare_kernel")),
          ("moe layout", ("_pad_rows_kernel", "_tables_kernel")),
          ("norm+elementwise", ("triton_", "elementwise", "reduce_kernel", "vectorized", "copy",
                                "cat", "fill", "index")),
          ("attention", ("flash", "fmha", "attention", "sdpa", "cudnn::fusion")),
          ("gemm", ("gemm", "sm90", "nvjet", "cutlass", "matmul", "_mainloop", "xmma",
                    "scaled_mm", "_fp8_scaled_kernel")),
          ("optimizer", ("adam", "multi_tensor", "foreach")))


def _kind(name: str) -> str:
    low = name.lower()
    return next((k for k, keys in _KINDS if any(s.lower() in low for s in keys)), "other")


def profile_step(model_name: str, recipe: str, args, device: torch.device) -> dict:
    """GPU time per kernel kind for one compiled training step, plus idle time and launches."""
    with kernel_settings(recipe):
        return _profile_step(model_name, recipe, args, device)


def _profile_step(model_name: str, recipe: str, args, device: torch.device) -> dict:
    from torch.profiler import ProfilerActivity, profile
    batch, seq = BATCH.get(model_name, (args.batch, args.seq))
    model, _ = build(model_name, recipe, seq, device)
    apply_suffix(model, recipe)                  # as the timed run of this recipe@setting
    compile_blocks(model, args.mode)
    replay = args.graph == "step"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=replay)
    x = torch.randint(0, 256, (batch, seq), device=device)
    y = torch.roll(x, -1, 1)
    for _ in range(3):
        train_step(model, opt, x, y)
    # --graph step: one replay of the captured step, as timed (the gaps between its kernels
    # are the graph's own); else the kernels launched eagerly (gaps include host time)
    step = make_step(model, opt, x, y, args.graph)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True) as prof:
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - t0
    # device-side events, less the ranges annotated on the stream (Inductor's "## Call
    # CompiledFxGraph ...", torch 2.11; the optimizer's "Optimizer.step#AdamW.step"): they span
    # kernels and are not kernels themselves (before session 47 the optimizer's range counted
    # as a kernel: "optimizer" read twice its kernel time, GPU busy was right)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith("## ") and not getattr(e, "is_user_annotation", False)
               and not e.name.startswith("Optimizer.")]
    spans = [(e.time_range.start, e.time_range.end, _kind(e.name)) for e in kernels]
    by_kind: dict[str, float] = {}
    for e, (_, _, kind) in zip(kernels, spans):
        by_kind[kind] = by_kind.get(kind, 0.0) + e.device_time / 1e3
    busy = _union_ms([s[:2] for s in spans])
    top = sorted(((e.name[:70], e.device_time / 1e3) for e in kernels), key=lambda t: -t[1])
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name, ms_ in top:
        totals[name] = totals.get(name, 0.0) + ms_
        counts[name] = counts.get(name, 0) + 1
    del model, opt, step
    _free(device)
    return {"model": model_name, "recipe": recipe, "replay": replay, "wall_ms": wall * 1e3,
            "gpu_busy_ms": busy, "idle_ms": wall * 1e3 - busy, "launches": len(kernels),
            "by_kind_ms": {k: round(v, 3) for k, v in sorted(by_kind.items(), key=lambda t: -t[1])},
            "gaps": kernel_gaps(spans),
            "top_kernels_ms": dict(sorted(totals.items(), key=lambda t: -t[1])[:30]),
            "top_launches": dict(sorted(counts.items(), key=lambda t: -t[1])[:30]),
            "quantize_durations": duration_buckets(
                [(e.name, e.device_time) for e in kernels], ("quantize", "dequantize")),
            "microscale_ops": _op_table(prof), "aten_ops": _aten_table(prof),
            # every launch in stream order, [name, µs, gap before it in µs]: which kernel of
            # which layer a duration belongs to (written beside --out, not printed)
            "sequence": _sequence(kernels)}


def _sequence(kernels: list) -> list:
    """The profiled launches by start time: ``[name, µs, idle µs since the last one ended]``."""
    out, end = [], None
    for e in sorted(kernels, key=lambda e: e.time_range.start):
        gap = 0.0 if end is None else max(e.time_range.start - end, 0)   # µs, as the spans
        out.append([e.name[:70], round(e.device_time, 1), round(gap, 1)])
        end = e.time_range.end
    return out


def duration_buckets(launches: list[tuple[str, float]], kinds: tuple[str, ...]) -> dict:
    """The launches of the kernels of ``kinds`` by name and duration: ``{name: [[µs, count,
    total ms], ...]}``, durations rounded to two significant digits, longest total first. A
    step quantizes tensors of a few sizes, each with its own duration, so the buckets say which
    tensors a kernel's time goes to (a replayed step's launches carry no shapes)."""
    out: dict[str, dict[float, list]] = {}
    for name, us in launches:
        if _kind(name) not in kinds:
            continue
        bucket = out.setdefault(name[:60], {}).setdefault(float(f"{us:.2g}"), [0, 0.0])
        bucket[0] += 1
        bucket[1] += us / 1e3
    return {name: sorted(([us, n, round(ms_, 3)] for us, (n, ms_) in b.items()),
                         key=lambda r: -r[2])
            for name, b in sorted(out.items(), key=lambda t: -sum(v[1] for v in t[1].values()))}


def kernel_gaps(spans: list[tuple[int, int, str]]) -> dict:
    """The idle time between consecutive kernels (µs timestamps ``(start, end, kind)``, one
    stream or several): its total in ms, the number of gaps, and the total by the kind of the
    kernel that ends the gap (which launches a replay waits on)."""
    out = {"total_ms": 0.0, "count": 0, "by_next_kind_ms": {}, "launches_by_kind": {}}
    end = None
    for s, e, kind in sorted(spans):
        out["launches_by_kind"][kind] = out["launches_by_kind"].get(kind, 0) + 1
        if end is not None and s > end:
            gap = (s - end) / 1e3
            out["total_ms"] += gap
            out["count"] += 1
            out["by_next_kind_ms"][kind] = out["by_next_kind_ms"].get(kind, 0.0) + gap
        end = e if end is None else max(end, e)
    out["total_ms"] = round(out["total_ms"], 3)
    out["by_next_kind_ms"] = {k: round(v, 3) for k, v in sorted(
        out["by_next_kind_ms"].items(), key=lambda t: -t[1])}
    return out


def _aten_table(prof) -> dict:
    """Self GPU ms and calls of the eager ``aten::`` ops (the kernels launched outside Inductor
    and the quantize/GEMM kernels: copies, fills, casts inside op implementations), per shape."""
    rows = {}
    for e in prof.key_averages(group_by_input_shape=True):
        gpu = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
        if e.key.startswith("aten::") and gpu > 0:
            rows[f"{e.key} {e.input_shapes}"[:160]] = (e.count, round(gpu / 1e3, 3))
    return dict(sorted(rows.items(), key=lambda t: -t[1][1])[:25])


def _op_table(prof) -> dict:
    """GPU ms and calls of each ``microscale::`` op per input shape (where the kernels' time
    goes by tensor: which call of which shape is slow)."""
    rows = {}
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key.startswith("microscale::"):
            gpu = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
            rows[f"{e.key} {e.input_shapes}"[:160]] = (e.count, round(gpu / 1e3, 3))
    return dict(sorted(rows.items(), key=lambda t: -t[1][1])[:25])


def _union_ms(spans: list[tuple[int, int]]) -> float:
    total, end = 0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1e3


# ----------------------------------------------------------------------------- main
def add_ratios(rows: list[dict]) -> None:
    """``x_bf16``: tokens/s over the best bf16 run of the same model, whatever its @ settings
    (session 48: ``bf16@three-qkv`` beat ``bf16`` with q, k and v fused by 1.2%, and the best
    bf16 is the baseline); ``mem_x``: peak / that run's; ``baseline``: its recipe name."""
    for model in {r["model"] for r in rows}:
        same = [r for r in rows if r["model"] == model]
        base = max((r for r in same if r["recipe"].partition("@")[0] == "bf16"),
                   key=lambda r: r["tok_s"], default=None)
        for r in same:
            if base:
                r["x_bf16"] = r["tok_s"] / base["tok_s"]
                r["mem_x"] = r["peak_gb"] / base["peak_gb"] if r["peak_gb"] else None
                r["baseline"] = base["recipe"]
            base_recipe = r["recipe"].partition("@")[0]
            target = TARGETS.get(model, {}).get(base_recipe, TARGET_ANY.get(model))
            r["target"] = target if base_recipe not in ("bf16", *TORCHAO) else None


def baseline_notes(rows: list[dict], spread_max: float = 0.02) -> list[str]:
    """Warnings about the bf16 baseline of each model: a single bf16 run (one slow run inflates
    every ratio: session 44's 1b row read fp8_blockwise 1.265x against a bf16 run at 86,925
    tok/s; processes whose bf16 ran at 91,900-94,600 read it at 1.18-1.21x), or
    bf16 runs of one process further apart than ``spread_max``. Run bf16 first and last."""
    notes = []
    for model in sorted({r["model"] for r in rows}):
        runs = [r for r in rows if r["model"] == model and r["recipe"].partition("@")[0] == "bf16"]
        if not runs:
            continue
        best = max(runs, key=lambda r: r["tok_s"])          # the baseline, and its settings
        tok = [r["tok_s"] for r in runs if (r["recipe"], r.get("compile"), r.get("graph"))
               == (best["recipe"], best.get("compile"), best.get("graph"))]
        if len(tok) == 1:
            notes.append(f"{model}: one {best['recipe']} run; ratios rest on it alone (run "
                         "bf16 first and last, e.g. --recipes bf16,...,bf16)")
        elif len(tok) > 1 and max(tok) / min(tok) - 1 > spread_max:
            notes.append(f"{model}: the bf16 runs differ by {max(tok) / min(tok) - 1:.1%} "
                         f"({min(tok):,.0f}-{max(tok):,.0f} tok/s): the machine's speed moved "
                         "within the process; ratios use the faster run")
    return notes


def repeated(recipes: list[str], times: int) -> list[str]:
    """``recipes`` with everything between a leading and a trailing bf16 run repeated
    ``times`` times in turn (``--repeat``): A/B rows alternated in one process, the baseline
    first and last once."""
    head = 1 if len(recipes) > 1 and _is_bf16(recipes[0]) else 0
    tail = 1 if len(recipes) > head + 1 and _is_bf16(recipes[-1]) else 0
    middle = recipes[head:len(recipes) - tail]
    return recipes[:head] + middle * max(times, 1) + recipes[len(recipes) - tail:]


def _is_bf16(recipe: str) -> bool:
    return recipe.partition("@")[0] == "bf16"


def recipe_summary(rows: list[dict]) -> list[dict]:
    """Per model and recipe run more than once in the process: how many rows, the mean, lowest
    and highest ratio to the best bf16, and whether the mean and every row meet the target
    (one process's rows still spread by ~0.5%: session 55 read 1b nvfp4 0.8953-0.9068x)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r.get("x_bf16") is not None and not _is_bf16(r["recipe"]):
            groups.setdefault((r["model"], r["recipe"]), []).append(r)
    out = []
    for (model, recipe), runs in groups.items():
        if len(runs) < 2:
            continue
        xs = [r["x_bf16"] for r in runs]
        target = runs[0].get("target")
        mean = sum(xs) / len(xs)
        out.append({"model": model, "recipe": recipe, "rows": len(xs), "mean_x_bf16": mean,
                    "min": min(xs), "max": max(xs), "target": target,
                    "mean_meets": None if target is None else mean >= target,
                    "every_row_meets": None if target is None else min(xs) >= target})
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="125m")
    p.add_argument("--recipes", default=",".join(RECIPES + ("bf16",)),
                   help="comma-separated; bf16 first and last by default (baseline_notes)")
    p.add_argument("--torchao", action="store_true", help="add torchao float8 tensorwise + rowwise")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the recipes between a leading and a trailing bf16 this many times "
                        "in turn (A/B rows alternated; a summary per recipe follows the table)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile", choices=("blocks", "model", "none"), default="blocks")
    p.add_argument("--mode", default="default", help="torch.compile mode")
    p.add_argument("--graph", choices=("none", "step"), default="none",
                   help="step: replay the whole training step from one CUDA graph")
    p.add_argument("--bf16-also", default=None,
                   help="more bf16 runs as compile:graph pairs, e.g. model:none,blocks:none; the "
                        "fastest bf16 run is every ratio's baseline")
    p.add_argument("--profile", default=None, help="comma-separated recipes to profile (one step)")
    p.add_argument("--no-group-weights", action="store_true",
                   help="quantize each weight in its layer's forward (not all FP8 128x128 "
                        "weights in one launch per step, as the harness does)")
    p.add_argument("--keep-grads", action="store_true",
                   help="zero the gradients in place each step (before session 22) instead of "
                        "setting them to None")
    p.add_argument("--qkv", choices=("fused", "three"), default=None,
                   help="q, k and v as one projection or three, every row of the run (default: "
                        "the zoo's, three; ModelConfig.fused_qkv); a row's @three-qkv / "
                        "@fused-qkv wins")
    p.add_argument("--fused-qkv", action="store_const", const="fused", dest="qkv",
                   help="the same as --qkv fused (session 47's scripts)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    MODEL_OPTS.clear()
    MODEL_OPTS.update({} if args.qkv is None else {"fused_qkv": args.qkv == "fused"})
    GROUP_WEIGHTS[0] = not args.no_group_weights
    KEEP_GRADS[0] = args.keep_grads
    print(common.env_header(), flush=True)
    recipes = repeated(args.recipes.split(","), args.repeat) \
        + (list(TORCHAO) if args.torchao else [])
    rows, profiles, sequences = [], [], {}
    for model_name in args.models.split(","):
        for recipe in recipes:
            try:
                rows.append(run_one(model_name, recipe, args, device, args.compile, args.graph))
            except Exception as err:          # one failing run must not lose the others
                rows.append({"model": model_name, "recipe": recipe, "error": f"{type(err).__name__}: {err}"[:300]})
                _free(device)
            print(json.dumps(rows[-1], default=str), flush=True)
        for combo in (args.bf16_also.split(",") if args.bf16_also else []):
            how, graph = combo.split(":")
            rows.append(run_one(model_name, "bf16", args, device, how, graph))
            print(json.dumps(rows[-1], default=str), flush=True)
        for recipe in (args.profile.split(",") if args.profile and device.type == "cuda" else []):
            profiles.append(profile_step(model_name, recipe, args, device))
            sequences[f"{model_name} {recipe}"] = profiles[-1].pop("sequence")
            print(json.dumps(profiles[-1]), flush=True)
    ok = [r for r in rows if "error" not in r]
    add_ratios(ok)
    cols = ["model", "recipe", "compile", "graph", "batch", "quantized", "step_ms", "tok_s", "x_bf16",
            "target", "mfu", "peak_gb", "mem_x", "grouped", "compile_s"]
    print(common.fmt_table(ok, cols))
    for r in rows:
        if "error" in r:
            print(f"FAILED {r['model']} {r['recipe']}: {r['error']}")
    summary = recipe_summary(ok)
    if summary:
        print(common.fmt_table(summary, ["model", "recipe", "rows", "mean_x_bf16", "min", "max",
                                         "target", "mean_meets", "every_row_meets"]))
    notes = baseline_notes(ok)
    for note in notes:
        print(f"BASELINE {note}")
    payload = {"bench": "train", "argv": sys.argv[1:], "rows": rows, "profiles": profiles,
               "summary": summary, "baseline_notes": notes}
    if args.out:
        Path(args.out).write_text(json.dumps({"env": common.env_info(), **payload}, indent=1, default=str))
        if sequences:                   # the profiles' launch sequences, beside the results
            Path(args.out).with_suffix(".seq.json").write_text(json.dumps(sequences))
    common.json_line(payload)


if __name__ == "__main__":
    main()
