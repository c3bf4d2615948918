#!/usr/bin/env bash
# Session 47, call 1 (one H200, ~9 minutes; prepared in session 46): the GPU tests of the FP8
# many kernel's register tile and the weight cache, then 1b with every weight in one launch
# (the FP8 many kernel runs 1b's set in 1.41 ms against 2.68 ms one by one, bench_many):
# fp8_blockwise and mxfp8 (MXFP8 weights cached as codes and expanded) against the defaults,
# bf16 first and last; peak memory matters (FP8 and MXFP8 targets <= 0.8x of bf16).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session47a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 120 gpu_tests.txt python3 -m pytest -q -m gpu tests/test_weight_cache.py \
  tests/test_weight_cache_mx8.py -p no:benchmark
TAIL=10 step 60 many.txt python3 benchmarks/bench_many.py --models 125m,1b \
  --fmt fp8_block,mxfp8,mxfp8_expanded
TAIL=14 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@group-all,mxfp8,mxfp8@group-all-codes,mxfp8@group-all,bf16 \
  --out "$OUT/train_1b.json"
