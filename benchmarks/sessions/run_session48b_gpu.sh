#!/usr/bin/env bash
# Session 48, call 2 (one H200, ~8 minutes): q, k and v fused or three projections in ONE
# process per model (bench_train's @three-qkv / @fused-qkv rows), so the layouts share their
# bf16 baseline, bf16 included both ways: does one projection slow bf16 (the baseline must be
# the best bf16), and what does it give each recipe? Call 1 compared separate processes.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --qkv fused \
  --recipes bf16,bf16@three-qkv,fp8_blockwise,fp8_blockwise@three-qkv,nvfp4,nvfp4@three-qkv,bf16@three-qkv,bf16 \
  --out "$OUT/train_1b.json"
TAIL=14 step 220 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --qkv fused --recipes bf16,bf16@three-qkv,fp8_blockwise,fp8_blockwise@three-qkv,mxfp8,mxfp8@three-qkv,nvfp4,nvfp4@three-qkv,bf16@three-qkv,bf16 \
  --out "$OUT/train_125m.json"
