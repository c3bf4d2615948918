#!/usr/bin/env bash
# Session 58, call 8 (one H200, ~2 minutes): issue 12 item 5's NVFP4 half at 8192 tokens
# (session 50 timed 16384): bench_alpha_mm --training --models 50m,125m --tokens 8192, every
# fprop/dgrad/wgrad GEMM on the path ms.Linear takes, against cuBLAS bf16, graph-replayed;
# then 16384 beside it.
#     run: OUT=$OUT timeout 300 bash benchmarks/sessions/run_session58h_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for t in 8192 16384; do
  TAIL=8 step 130 "alpha_training_$t.txt" python3 benchmarks/bench_alpha_mm.py --training \
    --models 50m,125m --tokens $t
done
