#!/usr/bin/env bash
# Session 49, call 4 (one H200, ~8 minutes): the timed DeepGEMM choice at the sizes it was not
# measured on. 50m and 350m, one process each: bf16, fp8_blockwise (timed), @dg-prior (session
# 48's rule), @cublas (no DeepGEMM), bf16. DeepGEMM JIT-compiles these shapes in the first step.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 520 bash benchmarks/sessions/run_session49d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
R=bf16,fp8_blockwise,fp8_blockwise@dg-prior,fp8_blockwise@cublas,bf16
for m in 50m 350m; do
  TAIL=8 step 220 "train_$m.txt" python3 benchmarks/bench_train.py --graph step --warmup 2 \
    --steps 8 --models "$m" --recipes "$R" --out "$OUT/train_$m.json"
done
