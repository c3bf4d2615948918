#!/usr/bin/env bash
# Session 35, call 1 (one H100/H200, ~8 minutes): the 125m model with q, k and v in one
# projection (ModelConfig.fused_qkv, Megatron's layout) against the three projections, bf16
# and the recipes that miss or sit near their targets, one process per layout (each ratio
# against the bf16 of its own layout and process).
#     run: timeout 590 bash benchmarks/sessions/run_session35_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
R=bf16,fp8_blockwise,mxfp8,nvfp4
TAIL=10 step 260 train_125m_three.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes "$R" --out "$OUT/train_125m_three.json"
TAIL=10 step 260 train_125m_fused.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes "$R" --fused-qkv --out "$OUT/train_125m_fused.json"
