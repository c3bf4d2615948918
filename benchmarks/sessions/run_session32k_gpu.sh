#!/usr/bin/env bash
# Session 32, call 12 (one H100/H200, ~3 minutes): the reg pass's column view alone (the split
# pairs' first launch, issue 12's "RHT alone" column figure, 58% of the copy rate in call 10)
# per tile now that FAST_E2M1 is on: graph-replayed at 8192², amax given, RNE and SR.
#     run: timeout 330 bash benchmarks/sessions/run_session32k_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 300 quant_col.txt python3 benchmarks/bench_quant.py --only nvfp4/col_rht \
  --shapes 8192x8192 --no-ref --sweep --sweep-shapes 8192x8192 \
  --sweep-only nvfp4/col_rht@amax_given,nvfp4/col_rht_sr@amax_given
