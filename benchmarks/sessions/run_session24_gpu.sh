#!/usr/bin/env bash
# Session 24, call 1 (one H100): the grouped GEMM kernels after their tile prologue moved into
# shared helpers (tokens_tile / reduce_tile): GPU tests; then a profile of one 125m step of
# bf16, mxfp8 and nvfp4 (current code) to choose what to cut next.
#     run: timeout 590 bash benchmarks/sessions/run_session24_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s24; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session24.tgz" -C "$OUT" .; }
TAIL=12 step 230 gpu_tests_grouped.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py
pack
TAIL=6 step 330 train_125m_profile.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,mxfp8,nvfp4 --profile bf16,mxfp8,nvfp4 \
  --out "$OUT/train_125m_profile.json"
pack
