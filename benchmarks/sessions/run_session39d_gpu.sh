#!/usr/bin/env bash
# Session 39, call 4 (one H200, ~8 minutes; carry .whl for torchao): the 1b row of the training
# table at this session's defaults, every recipe and torchao's float8 peers in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session39d_gpu.sh      (carry: .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 560 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --torchao --out "$OUT/train_1b.json"
