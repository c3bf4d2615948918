#!/usr/bin/env bash
# Session 25, call 8 (one H100): where a 1b step's time goes for the two recipes that miss
# issue 11's 1b targets (mxfp8 1.1x, nvfp4 0.9x): one profiled step each, and bf16's.
#     run: timeout 590 bash benchmarks/sessions/run_session25g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25g.tgz" -C "$OUT" .; }
TAIL=8 step 560 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,mxfp8,nvfp4 \
  --profile bf16,mxfp8,nvfp4 --out "$OUT/train_1b.json"
pack
