#!/usr/bin/env bash
# Session 42, call 2 (one H200, ~9 minutes): the row kernel with integer work moved from the
# ALU pipe to the FMA pipe (CONFIG["ROW1"]["PIPES"]): its GPU tests, then the PIPES sweep
# (codes RNE and SR, expanded SR); then the NVFP4 quantizer GPU tests call 1 did not reach.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session42b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 100 tests_row_pipes.txt python3 -m pytest -q -rfE -m gpu --tb=short \
  --durations=3 tests/test_kernels_nvfp4_row.py tests/test_e2m1_values.py -k "pipes or e2m1"
TAIL=40 step 230 sweep_pipes.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PIPES --sweep-shapes 8192x8192 --shapes 8192x8192 \
  --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/row_exp_sr@amax_given
TAIL=20 step 200 tests_quant_rest.txt python3 -m pytest -v -rfE -m gpu --tb=short \
  --durations=0 tests/test_kernels_quant.py \
  -k "(reg_pass_matches and shape2) or amax_pass_skips or sr_seeded or unclamped"
