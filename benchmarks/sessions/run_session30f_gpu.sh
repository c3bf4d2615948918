#!/usr/bin/env bash
# Session 30, call 5 (one H100/H200, ~3 minutes): the Gluon MXFP8 kernel as committed (scales
# by TMA, no issue handoff): GPU tests (its own, and the block-scaled dispatch that now takes it
# for path "fp8" on Hopper), stages 3/4/5 and a wider tile group, ceiling and Gaussian data.
#     run: timeout 590 bash benchmarks/sessions/run_session30f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s30f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session30f.tgz" -C "$OUT" .; }
TAIL=6 step 240 tests.log python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py \
  tests/test_kernels_mxfp8.py
pack
TAIL=60 step 240 bench.log python3 benchmarks/bench_mxfp8_wgmma.py \
  --shapes 8192x8192x8192,16384x8192x8192 --data uniform,gaussian
pack
