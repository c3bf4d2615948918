#!/usr/bin/env bash
# Session 36, call 5 (one H100/H200, ~3 minutes): SR / RNE (issue 12: <= 1.15x) read in three
# more processes, both shapes, graph-replayed, amax given: calls 1 and 3 read 1.14x and 1.16x.
#     run: timeout 300 bash benchmarks/sessions/run_session36e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for i in 1 2 3; do
  TAIL=12 step 70 "ratio_$i.txt" python3 benchmarks/bench_quant.py --no-ref \
    --shapes 8192x8192,16384x4096 --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given
done
grep -h "x the RNE time" "$OUT"/ratio_*.txt
