#!/usr/bin/env bash
# Session 39, call 6 (one H200, ~4 minutes): issue 12's NVFP4 quantizer figures on the H200 (the
# session-36 views: 1x16 RNE and SR, the column view with RHT and SR, rows RNE + columns
# RHT+SR, the dy pair), amax given, 8192² and 16384x4096, in two processes.
#     run: timeout 590 bash benchmarks/sessions/run_session39f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
Q="nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/rowcol_dy"
for i in 1 2; do
  TAIL=30 step 110 quant_$i.txt python3 benchmarks/bench_quant.py --no-ref \
    --shapes 8192x8192,16384x4096 --only "$Q"
done
