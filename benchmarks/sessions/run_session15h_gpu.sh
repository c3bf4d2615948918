#!/usr/bin/env bash
# Session 15, call 8 (one H100 or H200): the recompute default's cost at 125m, A/B in one
# process (call 7 measured fp8_blockwise 0.874x with it on, session 14 0.90x without).
#     run: timeout 300 bash benchmarks/sessions/run_session15h_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15h.tgz" -C "$OUT" .; }
TAIL=10 step 250 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_tensorwise,fp8_tensorwise@no-recompute,fp8_blockwise,fp8_blockwise@no-recompute \
  --steps 16 --warmup 3 --out "$OUT/train_125m.json"
pack
