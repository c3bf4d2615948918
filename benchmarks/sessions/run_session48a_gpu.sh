#!/usr/bin/env bash
# Session 48, call 1 (one H200, ~9 minutes; prepared in session 47): q, k and v in one
# projection (ModelConfig.fused_qkv, bf16 too) now that attention gets its own copy of v
# (session 47: 1b fp8_blockwise 1.194x with it fused, but +1.7 GB of peak through v's view of
# the fused output). 1b and 125m, fused, every FP8/FP4 recipe that has a target, bf16 first
# and last; the model's GPU tests first.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 60 gpu_tests.txt python3 -m pytest -q -p no:benchmark tests/test_model.py
TAIL=10 step 330 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --fused-qkv \
  --recipes bf16,fp8_blockwise,fp8_tensorwise,mxfp8,nvfp4,bf16 --out "$OUT/train_1b.json"
TAIL=10 step 150 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --fused-qkv --recipes bf16,fp8_blockwise,mxfp8,nvfp4,bf16 --out "$OUT/train_125m.json"
