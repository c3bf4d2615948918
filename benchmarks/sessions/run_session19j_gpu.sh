#!/usr/bin/env bash
# Session 19, call 10 (one H100): ms.Linear mxfp8 at issue 12's shape with its A operands
# expanded (default) and as codes (MICROSCALE_EXPAND_MXFP8=0), interleaved, each in its own
# process: call 9 read 1.14x against session 16's 1.08x, across processes.
#     run: timeout 300 bash benchmarks/sessions/run_session19j_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19j; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19j.tgz" -C "$OUT" .; }
L="benchmarks/bench_linear.py --recipes mxfp8,mxfp4"
for i in 1 2; do
  TAIL=4 step 60 linear_exp_$i.log python3 $L
  TAIL=4 step 60 linear_codes_$i.log env MICROSCALE_EXPAND_MXFP8=0 python3 $L
done
pack
