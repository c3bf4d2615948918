#!/usr/bin/env bash
# Session 32, call 7 (one H100/H200, ~4 minutes): the row kernel's SR codes around their
# default tile ([8, 4] blocks, 1 warp: 59.9% of the copy rate in call 4, target 60%): two
# stages, other [.., ..] shapes of one warp, fewer programs, NAN_TILE off; 8192² and
# 16384x4096, graph-replayed, amax given.
#     run: timeout 400 bash benchmarks/sessions/run_session32f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 360 quant_sr.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16_sr@amax_given \
  --shapes 8192x8192 --no-ref --sweep --sweep-shapes 8192x8192,16384x4096 \
  --sweep-with STORE64 --sweep-only nvfp4/1x16_sr@amax_given
