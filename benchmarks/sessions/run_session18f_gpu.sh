#!/usr/bin/env bash
# Session 18, call 6 (one H100): the MoE experts' FP8 128x128 column view taken as the row
# view's codes and tile scales transposed (ops_experts TILE_TRANSPOSE). The grouped GPU tests
# for fp8_blockwise, then the moe-1b step against quantizing the column view again from a
# transposed copy of w (@grp-fp8-w-requant).
#     run: timeout 330 bash benchmarks/sessions/run_session18f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18f.tgz" -C "$OUT" .; }
TAIL=6 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py -k "fp8_blockwise"
pack
TAIL=8 step 170 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise,fp8_blockwise@grp-fp8-w-requant \
  --steps 6 --warmup 2 --out "$OUT/train_moe.json"
pack
