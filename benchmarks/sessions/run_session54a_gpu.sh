#!/usr/bin/env bash
# Session 54, call 1 (prepared in session 53, not yet run; one H200, ~6 minutes). Where 1b
# nvfp4 stands after session 53's GEMM amaxes (0.893x / 0.899x in its last two processes),
# measured twice in one process, beside q, k and v in one projection (Megatron's linear_qkv:
# one dy pair instead of three, one x view's amax; session 47 read +0.3% with it at 1b, before
# attention kept its own copy of v) and beside the amax passes (@gemm-amax-off). bf16 keeps
# the zoo's three projections (session 48: its faster layout), first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session54a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 560 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@fused-qkv,nvfp4@gemm-amax-off,nvfp4,nvfp4@fused-qkv,bf16 \
  --out "$OUT/train_1b.json"
