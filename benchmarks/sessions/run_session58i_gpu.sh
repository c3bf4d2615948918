#!/usr/bin/env bash
# Session 58, call 9 (one H200, ~2 minutes): call 8 found two NVFP4 GEMMs under issue 12's
# 0.7x at 8192 tokens, 50m's up dgrad and down fprop (8192x640x2560: 0.69x), whose 640-wide
# output is 2.5 of gemm_alpha's 256-wide tiles. Every bench_alpha_mm tile config at those and
# the 640x640 shapes, 8192 and 16384 tokens (graph-replayed, each checked against the fp32 mm).
#     run: OUT=$OUT timeout 300 bash benchmarks/sessions/run_session58i_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 280 alpha_640.txt python3 benchmarks/bench_alpha_mm.py --models 50m-640
