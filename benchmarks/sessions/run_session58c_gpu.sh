#!/usr/bin/env bash
# Session 58, call 3 (one H200, ~4 minutes): the RHT'd row codes' own tile (CONFIG["ROW1"]
# ["RHT_CODES"]): at 72 registers (80 before the bf16 pairs) 28 one-warp programs fit an SM
# where 24 run. bench_quant's sweep plan for it (every config checked bit-exact against the
# default's output), graph-replayed, amax given, 8192² and 16384x4096.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session58c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 360 sweep_rht.txt python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192 \
  --only nvfp4/1x16_rht@amax_given,nvfp4/1x16@amax_given --sweep \
  --sweep-shapes 8192x8192,16384x4096 --sweep-only nvfp4/1x16_rht --sweep-with RHT_CODES
