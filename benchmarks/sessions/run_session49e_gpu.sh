#!/usr/bin/env bash
# Session 49, call 5 (one H200, ~4 minutes): issue 12 item 5's FP8 half at the 50m and 125m
# shapes (16384 tokens): bench_deepgemm --layers 50m,125m, DeepGEMM / cuBLASLt / bf16 and the
# faster library against bf16, graph-replayed; the 24 GEMMs JIT-compiled in parallel first.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 330 bash benchmarks/sessions/run_session49e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
for i in $(seq 0 23); do
  timeout 100 python3 benchmarks/bench_deepgemm.py --layers 50m,125m --only "$i" --warm \
    > "/tmp/warm_$i.txt" 2>&1 &
done
wait
TAIL=30 step 120 dg_small.txt python3 benchmarks/bench_deepgemm.py --layers 50m,125m \
  --out "$OUT/dg_small.json"
