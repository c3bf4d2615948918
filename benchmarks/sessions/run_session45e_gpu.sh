#!/usr/bin/env bash
# Session 45, call 6 (one H200, ~6 minutes): the other sizes session 45's defaults touch (50m
# and 350m: MXFP8 weights grouped and expanded, narrow MXFP8 xᵀ kept expanded), mxfp8 against
# each change off, bf16 first and last, one process per size.
#     run: OUT=$OUT timeout 470 bash benchmarks/sessions/run_session45e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for m in 350m 50m; do
  TAIL=9 step 225 "train_$m.txt" python3 benchmarks/bench_train.py --graph step --warmup 2 \
    --steps 6 --models "$m" --recipes bf16,mxfp8,mxfp8@nogroup,mxfp8@xt-codes,bf16 \
    --out "$OUT/train_$m.json"
done
