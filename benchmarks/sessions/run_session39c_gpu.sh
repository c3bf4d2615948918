#!/usr/bin/env bash
# Session 39, call 3 (one H100/H200, ~4 minutes): the 350m step in one process with NVFP4's α in
# the epilogue for fp32 weight gradients of 128+ output tiles (the new default: the up and down
# projections' 128 tiles at 350m) against it off (@no-alpha-fp32), two pairs.
#     run: timeout 590 bash benchmarks/sessions/run_session39c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 400 train_350m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 350m \
  --recipes bf16,nvfp4,nvfp4@no-alpha-fp32,nvfp4,nvfp4@no-alpha-fp32 --out "$OUT/train_350m.json"
