#!/usr/bin/env bash
# Session 45, call 3 (one H200, ~4 minutes): with MXFP8 weights grouped and expanded (calls
# 1-2), what else the 125m mxfp8 step can shed: the down projection's input recomputed in
# backward (@recompute: row view alone in forward, the column view expanded in backward, no
# xᵀ kept or decoded), wgrad's xᵀ kept expanded (@xt-expanded: bf16 memory), and @nogroup
# again; bf16 first and last.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session45b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,mxfp8,mxfp8@recompute,mxfp8@xt-expanded,mxfp8@nogroup,mxfp8,bf16 \
  --out "$OUT/train_125m.json"
