#!/usr/bin/env bash
# Session 47, call 6 (one H200, ~4 minutes, the budget's last): 1b with q, k and v in one
# projection for every run, bf16 too (ModelConfig.fused_qkv, Megatron's layout; measured at
# 125m only, session 35): fp8_blockwise's k/v weight gradients run at half the SMs (64 output
# tiles) and its dq/dk/dv pairs are three launches a layer.
#     run: OUT=$OUT timeout 270 bash benchmarks/sessions/run_session47f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 240 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --fused-qkv \
  --recipes bf16,fp8_blockwise,bf16,nvfp4 --out "$OUT/train_1b.json"
