#!/usr/bin/env bash
# Session 32, call 8 (one H100/H200, ~4 minutes): the row kernel's SR codes at [4, 8] blocks
# with one warp (call 7's best): its GPU tests and issue 12's 1x16 figures at 8192² and
# 16384x4096 (graph-replayed).
#     run: timeout 400 bash benchmarks/sessions/run_session32g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 200 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py \
  tests/test_e2m1_values.py
TAIL=30 step 90 quant_1x16.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192,16384x4096 --no-ref
