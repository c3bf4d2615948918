#!/usr/bin/env bash
# Session 43, call 1 (one H200, ~9 minutes): the register pair kernels' tile loop
# software-pipelined (NUM_STAGES_reg 2: the next tile's loads issued as cp.async into shared
# memory while this one is quantized; offline SASS, Triton 3.6: registers unchanged). The
# MXFP8 and FP8 1x128 pair sweeps at the 125m shapes (every config's bits checked against the
# default's), then 125m training with each pipelined against its default in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session43a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 160 sweep_pairs.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only mxfp8/rowcol,fp8_block/1x128_rowcol --sweep-shapes 16384x3072,16384x768 \
  --shapes 16384x3072 --only mxfp8/rowcol_x,mxfp8/rowcol_dy,fp8_block/1x128_rowcol
TAIL=30 step 400 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes \
  bf16,mxfp8,mxfp8@mx8-s2,fp8_blockwise,fp8_blockwise@fp8-s2,mxfp8 \
  --out "$OUT/train_125m.json"
