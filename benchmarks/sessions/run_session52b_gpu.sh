#!/usr/bin/env bash
# Session 52, call 2 (one H200, ~8 minutes). Call 1's Nsight Compute read of a 1b MLP: the
# recomputed relu²(u) column view (16384x8192, REG_COL["RNE"]'s launch) ran 216.8 µs at 168
# registers with 4 programs of 2 warps an SM where 6 fit (2 warps a scheduler, 3.28 cycles
# between a warp's instructions: latency-bound); du's RHT+SR column view 210.1 µs, issue-bound
# (0.72 instructions a scheduler-cycle); the 16384x2048 x pairs in one launch at 255
# registers, 1 warp a scheduler (87.6 µs). First both column views alone under launch
# configs (bench_quant.py's session-52 plans; every config's bits checked against the
# default's), then 1b nvfp4 with the relu² view at 6 programs and the x pairs split up to
# 2048 columns, in one process, bf16 first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session52b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 200 col_views.txt python3 benchmarks/bench_quant.py --no-ref \
  --only nvfp4/col_relu2_exp@amax_given,nvfp4/col_rht_sr_exp@amax_given \
  --shapes 16384x8192 --sweep \
  --sweep-only nvfp4/col_relu2_exp@amax_given,nvfp4/col_rht_sr_exp@amax_given \
  --sweep-shapes 16384x8192,16384x3072
TAIL=10 step 330 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-colrne-p6,nvfp4@nv-xsplit-2048,bf16 \
  --out "$OUT/train_1b.json"
