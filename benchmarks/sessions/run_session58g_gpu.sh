#!/usr/bin/env bash
# Session 58, call 7 (one H200, ~7 minutes): issue 12 item 5's FP8 half at 8192 tokens (the
# issue's M = 8192-16384; sessions 49-51 timed 16384 only): bench_deepgemm --tokens 8192
# --layers 50m,125m (DeepGEMM / cuBLASLt / bf16, the faster library against bf16,
# graph-replayed), the 24 GEMMs JIT-compiled in parallel first; then 16384 again beside it.
# DeepGEMM at 54e2261 with CUTLASS f3fde58 and fmt 553ec11 headers (its submodules), carried
# as the ignored .deps/DeepGEMM.
#     run (carry [".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session58g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 170 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
for t in 8192 16384; do
  for i in $(seq 0 23); do
    timeout 100 python3 benchmarks/bench_deepgemm.py --tokens $t --layers 50m,125m --only "$i" \
      --warm > "/tmp/warm_${t}_$i.txt" 2>&1 &
  done
  wait
  TAIL=32 step 120 "dg_small_$t.txt" python3 benchmarks/bench_deepgemm.py --tokens $t \
    --layers 50m,125m --out "$OUT/dg_small_$t.json"
done
