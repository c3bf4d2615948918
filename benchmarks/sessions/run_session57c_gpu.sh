#!/usr/bin/env bash
# Session 57, call 2 (one H200, ~9 minutes): the GPU tests of every kernel the session's
# changes touch, on the final code (call 1's ran out of time at ~95%, no failure; since then
# the column views' and the RHT row view's codes are shifted straight to their nibbles too,
# and tile_coords keeps its remainder), then 125m bf16 / nvfp4 / bf16 on the commit before
# (.base/src, carried) and on this one, in one process each.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session57c_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PYTHONPATH
BASE=$PWD/.base/src:$PYTHONPATH
TAIL=25 step 330 gpu_tests.txt python3 -m pytest -q -n 12 -m gpu -p no:cacheprovider \
  tests/test_e2m1_values.py tests/test_kernels_nvfp4_row.py tests/test_kernels_quant.py \
  tests/test_grouped_nvfp4_reg.py tests/test_expand.py
echo "pytest rc: ${PIPESTATUS[0]}" >> "$OUT/gpu_tests.txt"
for side in base new; do
  if [ "$side" = base ]; then export PYTHONPATH=$BASE; else export PYTHONPATH=$NEW; fi
  TAIL=8 step 110 "train_125m_$side.txt" python3 benchmarks/bench_train.py --graph step \
    --warmup 2 --models 125m --recipes bf16,nvfp4,bf16 --out "$OUT/train_125m_$side.json"
done
export PYTHONPATH=$NEW
