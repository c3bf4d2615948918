#!/usr/bin/env bash
# Session 16, call 8 (one H100 or H200): the GPU tests this session's changes touch (GEMM
# paths, expanded views, NVFP4 quantizers, training steps of the FP4 recipes), then a whole
# ms.Linear fwd+bwd per recipe at 16384 tokens, 4096 -> 14336 (issue 12 items 3, 4, 6; last
# run in session 3 on an H200).
#     run: timeout 500 bash benchmarks/sessions/run_session16h_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16h.tgz" -C "$OUT" .; }
TAIL=10 step 280 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_gemm.py tests/test_expand.py tests/test_gemm_alpha.py \
  tests/test_train_gpu.py -k "not fsdp and (nvfp4 or mxfp4 or gemm or expand or alpha or epilogue)"
pack
TAIL=30 step 180 bench_linear.log python3 benchmarks/bench_linear.py
pack
