#!/usr/bin/env bash
# Session 16, call 3 (one H100 or H200): the GPU tests around the α-epilogue GEMM (kernel,
# layer, whole training steps of nvfp4 under sync-debug mode, compiled and graph-captured),
# then every recipe at 1b with torchao in one process.
#     run: timeout 580 bash benchmarks/sessions/run_session16c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16c.tgz" -C "$OUT" .; }
TAIL=12 step 230 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_alpha.py tests/test_expand.py tests/test_train_gpu.py \
  -k "alpha or epilogue or expand or (no_host_sync and nvfp4) or (replays and nvfp4) or (bit_exact and nvfp4)"
pack
TAIL=16 step 330 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --torchao --steps 8 --warmup 2 --out "$OUT/train_1b.json"
pack
