#!/usr/bin/env bash
# Session 41, call 3 (one H200, ~8 minutes): the row kernel's GPU tests with PACK's element-7
# placement rewritten (call 1: ptxas dropped `g << 6` from the RNE words); PACK A/B again at
# 8192²; 125m training: nvfp4 (PACK, REG_COL PREFETCH both default now) against nvfp4@pack0
# and nvfp4@col-old, in one process beside compiled bf16.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session41c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=25 step 150 tests_row.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_nvfp4_row.py tests/test_e2m1_values.py
TAIL=30 step 120 sweep_pack.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PACK \
  --sweep-shapes 8192x8192 --sweep-only nvfp4/1x16@,nvfp4/1x16_sr@,nvfp4/1x16_rht@,nvfp4/row_exp_sr@ \
  --shapes 8192x8192,16384x4096 \
  --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/1x16_rht@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_dy
TAIL=30 step 240 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 --steps 10 \
  --models 125m --recipes bf16,nvfp4,nvfp4@pack0,nvfp4@col-old,nvfp4 --out "$OUT/train_125m.json"
