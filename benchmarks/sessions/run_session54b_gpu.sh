#!/usr/bin/env bash
# Session 54, call 2 (one H200, ~5 minutes). Call 1 read 1b nvfp4 at 0.894x / 0.898x, q/k/v
# fused 0.888x / 0.879x (dropped) and the GEMM amaxes off 0.894x (level). Here: NVFP4's
# weights grouped (@nv-group: every W's amax in one launch, then every W in one; 6 + 6
# launches a layer now), twice, and replay profiles of bf16 and nvfp4 with every launch in
# order (train_1b.seq.json), to find what a layer's small launches cost against bf16's.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session54b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 570 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-group,nvfp4,nvfp4@nv-group,bf16 --profile bf16,nvfp4 \
  --out "$OUT/train_1b.json"
