#!/usr/bin/env bash
# Session 57, calls 3-4 (one H200, ~9 minutes each): the kernel changes in training. The
# 1b model, bf16 / nvfp4 / bf16 in one process, once on the commit before them (.base/src,
# carried) and once on this one, in the order ORDER gives (call 3 "base new", call 4 "new
# base"); each process's ratios are against its own bf16.
#     run: OUT=$OUT ORDER="base new" timeout 590 bash benchmarks/sessions/run_session57b_gpu.sh
#     (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PYTHONPATH
BASE=$PWD/.base/src:$PYTHONPATH
for side in ${ORDER:-base new}; do
  if [ "$side" = base ]; then export PYTHONPATH=$BASE; else export PYTHONPATH=$NEW; fi
  TAIL=8 step 285 "train_1b_$side.txt" python3 benchmarks/bench_train.py --graph step \
    --warmup 2 --steps 5 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,bf16 \
    --out "$OUT/train_1b_$side.json"
done
export PYTHONPATH=$NEW
