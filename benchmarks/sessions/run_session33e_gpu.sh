#!/usr/bin/env bash
# Session 33, call 5 (one H100/H200, ~4 minutes): issue 12's NVFP4 layer (16384 tokens,
# 4096 -> 14336) with its existing kernel sets A/B'd in one process: the row kernel taking
# the expanded row views ("row1"), the x pair split at every width ("nv-split-x"), both.
#     run: timeout 590 bash benchmarks/sessions/run_session33e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 300 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4@row1,nvfp4@nv-split-x,nvfp4_no_sr,nvfp4_no_sr@row1,nvfp4@row1,nvfp4
