#!/usr/bin/env bash
# Session 14, call 4 (one H100 or H200): the MXFP4 kernel's tile configs on the mxfp4 recipe's
# pairs as a layer asks for them (x: rows expanded + columns RHT 32; dy: both SR and expanded),
# at the 125m shapes (call 2's profile: _mx_kernel is 33 of the 78 ms of a 125m mxfp4 step).
#     run: timeout 590 bash benchmarks/run_session14d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14d.tgz" -C "$OUT" .; }
TAIL=60 step 400 quant_mxfp4.log python3 benchmarks/bench_quant.py --only mxfp4/rowcol \
  --shapes 16384x3072 --no-ref --sweep --sweep-shapes 16384x3072,16384x768 \
  --sweep-only mxfp4/rowcol
pack
