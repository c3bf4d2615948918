#!/usr/bin/env bash
# Session 43, call 7 (one H200, the session's last ~4 minutes): the MXFP8 pair kernel on
# [32, 64] tiles with one warp (quant_mx.CONFIG["BC_reg"] 64: a column block's 32 rows stay in
# the warp, so no barrier across warps; offline 12 -> 3 BAR.SYNC), swept at the 125m shapes
# (bits checked against the default's), 125m mxfp8 training with it, then its GPU tests.
#     run: OUT=$OUT timeout 250 bash benchmarks/sessions/run_session43g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 80 sweep_mx_bc64.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only mxfp8/rowcol --sweep-with BC_reg --sweep-shapes 16384x3072,16384x768 \
  --shapes 16384x768 --only mxfp8/rowcol_x
TAIL=12 step 90 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,mxfp8,mxfp8@mx8-bc64,mxfp8@mx8-bc64p16 \
  --out "$OUT/train_125m.json"
TAIL=12 step 60 tests_mx_bc64.txt python3 -m pytest -q -rfE -m gpu --tb=short \
  tests/test_kernels_quant.py -k "stages_exact and BC_reg"
