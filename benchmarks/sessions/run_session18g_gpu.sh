#!/usr/bin/env bash
# Session 18, call 7 (one H100): a smoke run after the module splits (pure moves): the FP8
# quantizer kernels now live in kernels/quant_fp8_kernels.py, so compile and check them on the
# GPU (row+column modes, the views alone, the 1x128 / 128x128 quantize cases).
#     run: timeout 150 bash benchmarks/sessions/run_session18g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18g.tgz" -C "$OUT" .; }
TAIL=6 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py -k "fp8 and (rowcol_kernels or view_alone or quantize_exact)"
pack
