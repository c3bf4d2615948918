#!/usr/bin/env bash
# Session 32, call 11 (one H100/H200, ~4 minutes): the row kernel with the RHT (a row view's
# 16-point RHT rotated in the thread that holds its block; the rows pass before): its GPU
# tests, and issue 12's 1x16 figures (RNE, SR, RHT; amax given and with the amax pass) at
# 8192² and 16384x4096.
#     run: timeout 420 bash benchmarks/sessions/run_session32j_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 280 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py
TAIL=30 step 100 quant_1x16.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192,16384x4096 --no-ref
