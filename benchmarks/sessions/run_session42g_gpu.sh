#!/usr/bin/env bash
# Session 42, call 7 (one H200, ~3 minutes): the GPU tests call 6 cut short, those that run
# the reg pass's SR column view with the wide Philox (REG_COL PHILOX_WIDE, now on): the row
# kernel's Philox pairs (a split SR dy pair) and the expanded SR dy views.
#     run: OUT=$OUT timeout 220 bash benchmarks/sessions/run_session42g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 100 tests_row.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_nvfp4_row.py -k "gpu_row_kernel and default"
TAIL=12 step 100 tests_expand.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_expand.py -k "nvfp4"
