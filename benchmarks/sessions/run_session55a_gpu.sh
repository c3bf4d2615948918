#!/usr/bin/env bash
# Session 55, call 1 (prepared in session 54, not yet run; one H200, ~8 minutes). First the
# unclamped column view's GPU test, which session 54's call 5 cut at 100 s before it
# reported (COL_UNCLAMPED is on by default since ccab1dc), then 1b nvfp4 at today's defaults
# (xᵀ kept expanded, the split column views unclamped) against @nv-col-clamped, alternated,
# and nvfp4_no_sr.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session55a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 200 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py -k col_view_unclamped
TAIL=3 step 350 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-col-clamped,nvfp4,nvfp4@nv-col-clamped,nvfp4,nvfp4_no_sr,bf16 \
  --out "$OUT/train_1b.json"
grep -hE '^(model|-----|1b )' "$OUT/train_1b.txt"
