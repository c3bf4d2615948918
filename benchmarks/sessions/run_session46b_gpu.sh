#!/usr/bin/env bash
# Session 46, call 2 (one H200, ~8 minutes): the compiled-zoo recompute tests (call 1's one
# unfinished test is among them), then 1b bf16, mxfp8 and nvfp4 with a profile of one step
# each, kernels by kind as bench_train classifies them now (the NVFP4 row kernel counted as
# quantize; sessions 31-45 left it in "other").
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session46b_gpu.sh  (carry .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 200 gpu_tests.txt python3 -m pytest -q -n 3 -m gpu tests/test_recompute.py \
  -k "compiled_zoo" -p no:benchmark
TAIL=12 step 360 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --recipes bf16,mxfp8,nvfp4 \
  --profile bf16,mxfp8,nvfp4 --out "$OUT/train_1b.json"
