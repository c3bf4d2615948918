#!/usr/bin/env bash
# Session 42, call 3 (one H200, ~9 minutes): the MXFP8 pair kernel with its next tile's raw
# words loaded first (quant_mx.CONFIG["PREFETCH_reg"]): its GPU test (prefetch against the
# plain loop, and the register pair kernel's tests), the tile sweep at the 125m shapes, then
# 125m training with it against the default in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session42c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 100 tests_mx.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_quant.py tests/test_recompute.py -k "mx8_prefetch or (relu_prologues and mxfp8)"
TAIL=40 step 120 sweep_mx.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PREFETCH_reg --sweep-shapes 16384x3072,16384x768 --shapes 16384x3072 \
  --only mxfp8/rowcol_x,mxfp8/rowcol_dy
TAIL=30 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,mxfp8,mxfp8@mx-prefetch,mxfp8@mx-prefetch5,mxfp8 \
  --out "$OUT/train_125m.json"
