#!/usr/bin/env bash
# Session 15, call 10 (one H100 or H200): the grouped NVFP4 quantizer's new tile on the GPU:
# the grouped GPU tests, then moe-1b bf16 / fp8_blockwise / nvfp4 in one process.
#     run: timeout 330 bash benchmarks/sessions/run_session15j_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15j; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15j.tgz" -C "$OUT" .; }
TAIL=8 step 80 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py
pack
TAIL=12 step 220 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise,nvfp4 --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
