#!/usr/bin/env bash
# Session 42, call 1 (one H200, ~8 minutes): the GPU tests owed since session 41's REG_COL
# change (the NVFP4 quantizer tests that call 5 did not reach, the expanded views), then the
# reg pass's column view with the wide Philox multiplies (REG_COL PHILOX_WIDE), timed.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session42a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 200 tests_quant_rest.txt python3 -m pytest -q -rfE -m gpu --tb=short \
  --durations=3 tests/test_kernels_quant.py \
  -k "rht_randn or rowcol_exact or reg_pass_matches or amax_pass_skips or sr_seeded or unclamped"
TAIL=12 step 150 tests_expand.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_expand.py
TAIL=16 step 90 sweep_col_wide.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PHILOX_WIDE --sweep-shapes 8192x8192 --shapes 8192x8192 \
  --only nvfp4/col_rht_sr@amax_given
