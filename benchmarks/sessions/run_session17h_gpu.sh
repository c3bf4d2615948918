#!/usr/bin/env bash
# Session 17, call 8 (one H100): the GPU tests call 7 ran out of time on (the trainer and
# FSDP2 graph tests, the GEMM kernels' every-key and strategy tests: the dequant strategy's
# GEMM moved to gemm_alpha).
#     run: timeout 560 bash benchmarks/sessions/run_session17h_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17h.tgz" -C "$OUT" .; }
TAIL=6 step 540 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short -m gpu \
  tests/test_kernels_gemm.py tests/test_train_gpu.py -k "gpu_ or trainer or fsdp2"
pack
