#!/usr/bin/env bash
# Session 43, call 3 (one H200, ~8 minutes): the register pair kernels with their tile loop
# software-pipelined (NUM_STAGES_reg 2 and 3), bit for bit on the GPU (new test, plus the
# pair kernels' NaN/Inf tests); the FP8 1x128 pair sweep at issue 12's layer shape (16384 x
# 4096 and x 14336); the fp8_blockwise layer (issue 12, item 4) with each, against torchao's
# blockwise linear, in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session43c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 150 tests_stages.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_quant.py -k "rowcol_reg_stages_exact or test_gpu_rowcol_reg_exact or fp8_weight_pair_reg"
TAIL=30 step 110 sweep_fp8_layer.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only fp8_block/1x128_rowcol --sweep-with NAN_SEL --sweep-shapes 16384x14336,16384x4096 \
  --shapes 16384x4096 --only fp8_block/1x128_rowcol
TAIL=20 step 200 bench_linear.txt python3 benchmarks/bench_linear.py --recipes \
  fp8_blockwise,fp8_blockwise@fp8-s2,fp8_blockwise@fp8-s3,torchao_blockwise,fp8_blockwise
