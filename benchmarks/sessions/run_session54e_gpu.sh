#!/usr/bin/env bash
# Session 54, call 5 (one H200, ~5 minutes; the session's last ~440 s of device time). With
# NVFP4's xᵀ kept expanded (2d6f087) every x pair splits, so the column view alone now runs
# for the three x a layer as well as the five dy: COL_UNCLAMPED (off; the RHT's input clamp
# skipped where the amax pass's max|x| allows, the same bits) touches 8 launches a layer, not
# 5. Its GPU test (the x pair as a layer now asks included), then 1b nvfp4 against
# @nv-col-unclamped, alternated.
#     run (carry [".whl"]): OUT=$OUT timeout 400 bash benchmarks/sessions/run_session54e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=3 step 100 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py -k col_view_unclamped
TAIL=3 step 270 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-col-unclamped,nvfp4,nvfp4@nv-col-unclamped,bf16 \
  --out "$OUT/train_1b.json"
grep -hE '^(model|-----|1b )' "$OUT/train_1b.txt"
