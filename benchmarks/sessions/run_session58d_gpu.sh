#!/usr/bin/env bash
# Session 58, call 4 (one H200, ~4 minutes): the RHT'd row codes at their new default tile
# (RHT_CODES: [2, 32], 32 programs, 64 registers): the row kernel's GPU tests, then the RNE and
# RHT row codes before (.base/h/src, the session's start) and after, alternated twice
# (graph-replayed, amax given, 8192² and 16384x4096).
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session58d_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 150 gpu_tests.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_kernels_nvfp4_row.py
ONLY=nvfp4/1x16@amax_given,nvfp4/1x16_rht@amax_given
for i in 1 2; do
  for side in base new; do
    if [ "$side" = base ]; then src=.base/h/src; else src=src; fi
    TAIL=6 step 60 "quant_$side-$i.txt" env PYTHONPATH="$PWD/$src:$PYTHONPATH" \
      python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192,16384x4096 --only "$ONLY"
  done
done
