#!/usr/bin/env bash
# Session 32, call 13 (one H100/H200, ~4 minutes): a round-to-nearest column view alone at 4
# programs an SM, 1 stage (REG_COL["RNE"]; call 12: the RHT column view 58% -> 64% of the copy
# rate): its graph-replayed figure, and the 125m nvfp4 step with it and at the base tile in
# one process.
#     run: timeout 400 bash benchmarks/sessions/run_session32l_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 60 quant_col.txt python3 benchmarks/bench_quant.py --only nvfp4/col_rht \
  --shapes 8192x8192,16384x4096 --no-ref
TAIL=8 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@col-rne-base,nvfp4
