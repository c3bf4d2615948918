#!/usr/bin/env bash
# Session 38, call 4 (one H100, ~9 minutes): does the NVFP4 recompute pay below 2048 wide now
# that backward takes forward's amax? 125m (768-wide down projection) and 350m (1024): bf16,
# nvfp4 (xᵀ kept there: AUTO_MIN_OUT), nvfp4@recompute (forced), and again.
#     run: timeout 590 bash benchmarks/sessions/run_session38d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=9 step 250 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@recompute,nvfp4,nvfp4@recompute --out "$OUT/train_125m.json"
TAIL=8 step 290 train_350m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 350m \
  --recipes bf16,nvfp4@recompute,nvfp4,nvfp4@recompute --out "$OUT/train_350m.json"
