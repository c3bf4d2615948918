#!/usr/bin/env bash
# Session 30, call 7 (one H100/H200, ~3 minutes): the Gluon MXFP8 kernel with the per-chunk
# steps pipelined inside the warpgroup (two one-chunk chains in flight): GPU tests, ceiling,
# floor, Gaussian and outlier data.
#     run: timeout 590 bash benchmarks/sessions/run_session30g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s30g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session30g.tgz" -C "$OUT" .; }
TAIL=6 step 200 tests.log python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py
pack
TAIL=60 step 300 bench.log python3 benchmarks/bench_mxfp8_wgmma.py \
  --shapes 8192x8192x8192,16384x8192x8192 --data uniform,perchunk,gaussian,outliers
pack
