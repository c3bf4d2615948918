#!/usr/bin/env bash
# Session 45, call 5 (one H200, ~8 minutes): the final code (MXFP8 weights grouped and
# expanded; EXPAND_XT "auto", MXFP8 only): the GPU tests of the paths it touches, the README's
# 125m row (every recipe and torchao float8 in one process, bf16 first and last), and 1b
# mxfp8 against bf16 (first and last), which neither change should touch.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session45d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 140 gpu_tests.txt python3 -m pytest -q -m gpu tests/test_expand.py \
  tests/test_weight_cache_mx8.py tests/test_weight_cache.py
TAIL=16 step 290 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr,bf16 \
  --out "$OUT/train_125m.json"
TAIL=8 step 150 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --recipes bf16,mxfp8,bf16 \
  --out "$OUT/train_1b.json"
