#!/usr/bin/env bash
# Session 42, call 5 (one H200, ~4 minutes): the row kernel's codes with one 16-element block
# a thread (one Philox state: 64 registers offline, so 8 warps a scheduler instead of 5),
# SR and RNE, against today's [2, 32] tiles, at 8192² and 16384x4096.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session42e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 170 sweep_sr_tile.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PREFETCH --sweep-only nvfp4/1x16_sr@ --sweep-shapes 8192x8192,16384x4096 \
  --shapes 8192x8192 --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given
TAIL=20 step 120 sweep_rne_tile.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PREFETCH --sweep-only nvfp4/1x16@ --sweep-shapes 8192x8192,16384x4096 \
  --shapes 8192x8192 --only nvfp4/1x16@amax_given
