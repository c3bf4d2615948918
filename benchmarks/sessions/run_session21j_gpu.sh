#!/usr/bin/env bash
# Session 21, call 10 (one H100): FP8 128x128 weight pairs (fp32 master -> W and Wᵀ, one launch
# per weight at 1b: ~4.9 ms of the 1b fp8_blockwise step at ~40% of the copy rate, call 6):
# a warps / programs sweep at the 1b MLP weight shapes (bit-checked), then 1b fp8_blockwise
# with two candidates against the default in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session21j_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21j; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21j.tgz" -C "$OUT" .; }
TAIL=24 step 120 quant_sweep_fp8w.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x2048 --only fp8_block/128x128_rowcol_fp32 --sweep \
  --sweep-shapes 8192x2048,2048x8192 --sweep-only fp8_block/128x128_rowcol_fp32
pack
TAIL=8 step 200 train_1b_fp8w.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --recipes bf16,fp8_blockwise,fp8_blockwise@fp8w-8w2,fp8_blockwise@fp8w-8w4 \
  --out "$OUT/train_1b_fp8w.json"
pack
