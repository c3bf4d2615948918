#!/usr/bin/env bash
# Session 17, call 3 (the same warm H100 as call 2, whose steps below ran out of time while
# compiling): the register-layout grouped NVFP4 quantizer's tests on CUDA, and the moe-1b pairs
# old vs new and a few tiles.
#     run: timeout 560 bash benchmarks/sessions/run_session17c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17c.tgz" -C "$OUT" .; }
TAIL=8 step 230 gpu_tests_reg.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py
pack
TAIL=40 step 300 grouped_pairs.log python3 benchmarks/bench_grouped_sweep.py --pairs
pack
