#!/usr/bin/env bash
# Session 44, call 4 (one H200, ~7 minutes): the 1b row of the README's table at this code
# (the FP8 1x128 pair at 3 stages), every recipe and torchao float8 in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session44d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 580 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_1b.json"
