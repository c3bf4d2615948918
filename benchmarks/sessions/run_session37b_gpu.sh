#!/usr/bin/env bash
# Session 37, call 4 (one H100/H200, ~9 minutes): 125m in one process (issue 11's mxfp8 0.85x:
# where EXPAND_XT, wgrad's xᵀ kept expanded, stands since session 27's decode op; nvfp4 with
# the down projection's xᵀ recomputed, forced on at 125m), then 1b again (bf16, nvfp4,
# nvfp4@recompute: call 1's H200 read them level, 0.887x both, memory 0.84x -> 0.80x).
#     run: timeout 590 bash benchmarks/sessions/run_session37b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,mxfp8,mxfp8@xt-expanded,nvfp4,nvfp4@recompute,mxfp8,mxfp8@xt-expanded \
  --out "$OUT/train_125m.json"
TAIL=8 step 270 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4@recompute,nvfp4 --out "$OUT/train_1b.json"
