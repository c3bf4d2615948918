#!/usr/bin/env bash
# Session 24, call 5 (one H100, what budget is left): the NVFP4 reg-pass tests against the
# reference (no prologue: the reg views' shared loads were restructured) and the grouped
# NVFP4 kernels, which share those views.
#     run: timeout 300 bash benchmarks/sessions/run_session24e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s24e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session24e.tgz" -C "$OUT" .; }
TAIL=25 step 250 gpu_tests.log python3 -m pytest -v -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_grouped_gpu.py -k "(nvfp4 and reg) or (grouped and nvfp4)"
pack
