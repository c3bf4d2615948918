#!/usr/bin/env bash
# Session 36, call 3 (one H100/H200, ~9 minutes): MXFP4's SR codes through the same PTX path
# (quant_mx_views / quant_mx_col: the SR value's code), its GPU tests (every rowcol case, MXFP4
# rows with SR added) and MXFP4's SR views with it and (a second process) with 2008dc2's
# _e2m1.py, quant_mx_views.py and quant_mx_col.py (carried in .ab/); the reg pass's SR column
# view tiles at the new instruction mix; issue 12's ms.Linear figures for nvfp4.
#     run: timeout 590 bash benchmarks/sessions/run_session36c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
K=src/microscale/kernels
TAIL=12 step 200 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  tests/test_kernels_quant.py::test_gpu_rowcol_exact tests/test_kernels_quant.py::test_gpu_mxfp4_rht32_close
Q="mxfp4/1x32,mxfp4/rht_sr,mxfp4/rowcol_dy,nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given"
TAIL=24 step 80 quant_new.txt python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192 --only "$Q"
if [ -f .ab/_e2m1_before.py ]; then
  mkdir -p /tmp/new && cp $K/_e2m1.py $K/quant_mx_views.py $K/quant_mx_col.py /tmp/new/
  cp .ab/_e2m1_before.py $K/_e2m1.py; cp .ab/quant_mx_views_before.py $K/quant_mx_views.py
  cp .ab/quant_mx_col_before.py $K/quant_mx_col.py
  TAIL=24 step 80 quant_before.txt python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192 --only "$Q"
  cp /tmp/new/* $K/
fi
TAIL=20 step 110 sweep_col_sr.txt python3 benchmarks/bench_quant.py --no-ref --quick --sweep \
  --only nvfp4/col_rht_sr@amax_given --sweep-only nvfp4/col_rht_sr@amax_given --sweep-with RNE
TAIL=14 step 120 bench_linear.txt python3 benchmarks/bench_linear.py --recipes nvfp4,nvfp4_no_sr,mxfp4
