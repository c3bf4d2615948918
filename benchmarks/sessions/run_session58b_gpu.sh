#!/usr/bin/env bash
# Session 58, call 2 (one H200, ~5 minutes): session 57's call 5, prepared then and refused.
# Session 57's calls 3-4 read 1b nvfp4 0.7-1.2% slower with its kernel changes in every
# quantizer (850af58, .base/g/src) than on the commit before them (1b74f27, .base/b/src), both
# orders, while 125m read +0.4% and every kernel timed alone was level or faster. One profiled
# 1b nvfp4 step on each, its launches in order (train_1b_SIDE.seq.json; tools/seq_layer.py
# --by-name sets one layer's launches side by side).
#     run: OUT=$OUT timeout 300 bash benchmarks/sessions/run_session58b_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for side in base new; do
  if [ "$side" = base ]; then src=.base/b/src; else src=.base/g/src; fi
  TAIL=4 step 140 "train_1b_$side.txt" env PYTHONPATH="$PWD/$src:$PYTHONPATH" \
    python3 benchmarks/bench_train.py --graph step --warmup 2 --steps 3 --models 1b --batch 8 \
    --seq 2048 --recipes nvfp4 --profile nvfp4 --out "$OUT/train_1b_$side.json"
done
