#!/usr/bin/env bash
# Session 36, call 4 (one H100/H200, ~6 minutes): with SR's PTX path, does the row kernel now
# pay for the SR dy pair's expanded row view (ROW1 "expanded", opt-in since session 31 because
# it ran level)? The dy pairs graph-replayed both ways, then the 1b step (issue 11's nvfp4 line,
# 0.9x): bf16, nvfp4, nvfp4@row1, nvfp4 in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session36d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 60 dy_base.txt python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192,16384x3072 \
  --only nvfp4/rowcol_dy
MICROSCALE_NVFP4_ROW1_EXP=1 TAIL=8 step 60 dy_row1.txt python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x3072 --only nvfp4/rowcol_dy
TAIL=10 step 330 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@row1,nvfp4 \
  --out "$OUT/train_1b.json"
