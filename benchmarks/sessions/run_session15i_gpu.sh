#!/usr/bin/env bash
# Session 15, call 9 (one H100 or H200): tiles of the grouped NVFP4 quantizer (its amax and
# quantize passes took 17.6 + 23.8 ms of the moe-1b nvfp4 step in call 5).
#     run: timeout 200 bash benchmarks/sessions/run_session15i_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15i; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15i.tgz" -C "$OUT" .; }
TAIL=20 step 170 grouped_quant_sweep.log python3 benchmarks/bench_grouped_sweep.py --quant
pack
