#!/usr/bin/env bash
# Session 41, call 4 (one H200, ~8 minutes): RNE / RHT codes with PACK 2 at fewer programs an
# SM or a register cap (call 3: 95 registers left 21 of 24 programs resident); then 1b
# training: nvfp4 at the new defaults (PACK 1, REG_COL PREFETCH) against nvfp4@pack0 and
# nvfp4@col-old, one process beside compiled bf16.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session41d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=30 step 130 sweep_pack.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PACK \
  --sweep-shapes 8192x8192 --sweep-only nvfp4/1x16@,nvfp4/1x16_rht@ \
  --shapes 8192x8192 --only nvfp4/1x16@amax_given
TAIL=14 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 --steps 6 \
  --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@pack0,nvfp4@col-old,nvfp4 \
  --out "$OUT/train_1b.json"
