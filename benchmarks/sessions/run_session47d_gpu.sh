#!/usr/bin/env bash
# Session 47, call 4 (one H200, ~5 minutes): the last-program amax's GPU test (its call-3 run
# failed on the test's own list lookup, after the bit checks had passed), and replay profiles
# with and without it: launches and gaps of a 1b fp8_blockwise and a 125m mxfp8 step.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session47d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 60 gpu_tests.txt python3 -m pytest -q -m gpu -p no:benchmark tests/test_amax_last.py
TAIL=4 step 170 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 1 \
  --steps 2 --models 1b --batch 8 --seq 2048 --recipes bf16 \
  --profile fp8_blockwise,fp8_blockwise@pair-amax-atomic --out "$OUT/train_1b.json"
TAIL=4 step 120 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 1 \
  --steps 2 --models 125m --recipes bf16 --profile mxfp8,mxfp8@pair-amax-atomic \
  --out "$OUT/train_125m.json"
