#!/usr/bin/env bash
# Session 58, call 5 (one H200, ~3 minutes): call 3's register cap for the row kernel's RNE and
# SR codes (bench_quant's session-58 plans: their [2, 32] tile at 24 programs, 28 capped at 72
# registers, 32 capped at 64; every config checked bit-exact against the default's output),
# graph-replayed, amax given, 8192² and 16384x4096.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session58e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for v in sr rne; do
  if [ $v = sr ]; then only=nvfp4/1x16_sr@amax_given; key=SR_CODES
  else only=nvfp4/1x16@amax_given; key=RNE_CODES; fi
  TAIL=20 step 170 "sweep_$v.txt" python3 benchmarks/bench_quant.py --no-ref \
    --shapes 8192x8192 --only "$only" --sweep --sweep-shapes 8192x8192,16384x4096 \
    --sweep-only "$only" --sweep-with "$key+maxnreg"
done
