#!/usr/bin/env bash
# Session 41, call 5 (one H200, ~9 minutes): the GPU tests at the new defaults (ROW1
# PHILOX_WIDE, REG_COL PREFETCH at [256, 16]): the row kernel, the NVFP4 quantizer tests
# (reg pass, its column views, the amax pass, seeded SR), the fused MLP; then PHILOX_WIDE
# on/off and the SR codes' tile at 94 registers.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session41e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 150 tests_row.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_nvfp4_row.py tests/test_e2m1_values.py
TAIL=12 step 190 tests_quant.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_quant.py -k "nvfp4 or sr_seeded or unclamped or rowcol_exact"
TAIL=12 step 110 tests_mlp.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_mlp.py
TAIL=16 step 80 sweep_wide.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PHILOX_WIDE --sweep-shapes 8192x8192 --shapes 8192x8192 \
  --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given
