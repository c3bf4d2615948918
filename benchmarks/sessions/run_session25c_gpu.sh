#!/usr/bin/env bash
# Session 25, call 3 (one H100): the 1b table with the current code (mxfp8 now recomputes
# relu(u)²'s column view by default), every recipe and torchao 0.18 float8 (tensorwise,
# rowwise) in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session25c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25c.tgz" -C "$OUT" .; }
TAIL=16 step 570 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_1b.json"
pack
